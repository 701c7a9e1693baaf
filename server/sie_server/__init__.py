"""SIE server: one process that serves many small models behind one HTTP API."""

__version__ = "0.1.0"
