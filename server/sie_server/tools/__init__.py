"""Operator commands behind ``sie-server``: ``models pull``, ``bench`` and ``top``."""
