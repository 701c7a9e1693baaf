"""Log lines as text or JSON, each carrying the id of the request it is about.

A request's id lives in a context variable for the request's duration (set by the
``RequestMetrics`` middleware, ``api/middleware.py``), so every line logged while handling it
carries it without being passed around. The engine's batches run in their own tasks: a line
about a batch carries the ids of the batch's requests (``request_ids``), set by the scheduler
for the batch's duration. The forward pass runs on a lane thread, which sees no id.

``--log-format json`` writes one object a line: ``time``, ``level``, ``logger``, ``message``,
and when known ``request_id``, ``model``, ``request_ids``, ``trace_id``, ``exc_info``.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import os
import re
import sys
from contextvars import ContextVar
from typing import IO, Any, Literal

import orjson

from sie_server.observability import tracing

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_REQUEST_ID = 128
_VALID_ID = re.compile(r"[A-Za-z0-9._:\-]{1,%d}" % MAX_REQUEST_ID)  # noqa: UP031 - a regex's braces

REQUEST_ID: ContextVar[str | None] = ContextVar("sie_request_id", default=None)
REQUEST_MODEL: ContextVar[str | None] = ContextVar("sie_request_model", default=None)
BATCH_IDS: ContextVar[tuple[str, ...] | None] = ContextVar("sie_batch_request_ids", default=None)


_ID_PREFIX = os.urandom(8).hex()  # this process's; a counter after it makes each id in 30 ns, not a uuid's 1.5 us
_ID_COUNTER = itertools.count()


def new_request_id() -> str:
    """32 hex digits, unique across processes (random per process) and within one (a counter)."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"


def accept_request_id(raw: str | None) -> str:
    """The caller's ``X-Request-ID`` when it is 1-128 characters of letters, digits and ``._:-``;
    else a new id (a malformed one is replaced, never echoed)."""
    if raw is not None and _VALID_ID.fullmatch(raw):
        return raw
    return new_request_id()


def current_request_id() -> str | None:
    return REQUEST_ID.get()


class RequestContextFilter(logging.Filter):
    """Stamps each record with the request (or batch) it is about, from the context variables."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get()
        if not hasattr(record, "model"):
            record.model = REQUEST_MODEL.get()
        if not hasattr(record, "request_ids"):
            record.request_ids = BATCH_IDS.get()
        if not hasattr(record, "trace_id"):
            record.trace_id = tracing.current_trace_id() if tracing.enabled() else None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("request_id", "model", "request_ids", "trace_id"):
            value = getattr(record, key, None)
            if value:
                line[key] = list(value) if isinstance(value, tuple) else value
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """The plain format, with ``[request_id=...]`` (or the batch's ids) after a line about a request."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        request_id = getattr(record, "request_id", None)
        batch = getattr(record, "request_ids", None)
        if request_id:
            return f"{text} [request_id={request_id}]"
        if batch:
            return f"{text} [request_ids={','.join(batch)}]"
        return text


def handler(log_format: LogFormat, stream: IO[str] | None = None) -> logging.Handler:
    """A stream handler (stderr by default) writing ``log_format`` lines with the request context."""
    made = logging.StreamHandler(stream if stream is not None else sys.stderr)
    made.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    made.addFilter(RequestContextFilter())
    return made


def setup_logging(log_format: LogFormat, verbose: bool) -> None:
    """The root logger's one handler, for ``serve`` and ``gateway`` (replaces ``logging.basicConfig``)."""
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler(log_format))
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
