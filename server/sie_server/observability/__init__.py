"""Prometheus metrics and logging."""

from sie_server.observability.metrics import Metrics

__all__ = ["Metrics"]
