"""Connecting to NATS, for the gateway and the queue workers.

Credentials come from ``SIE_NATS_USER`` and ``SIE_NATS_PASSWORD`` when they are set (the Helm
chart fills them from a Secret; environment variables stay out of process listings), or from the
URL itself (``nats://USER:PASSWORD@HOST:4222``); logs show URLs without them. The connection
retries for ever; each of its events is one log line, not a traceback: a failed attempt, the
connection lost, the connection back. ``on_state`` hears whether it is connected after each change.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger(__name__)
USER_ENV = "SIE_NATS_USER"
PASSWORD_ENV = "SIE_NATS_PASSWORD"
RECONNECT_WAIT_S = 2.0


def credentials(environ: Mapping[str, str]) -> dict[str, str]:
    """``user``/``password`` keyword arguments for ``nats.connect`` from the environment; {} when unset."""
    user, password = environ.get(USER_ENV, ""), environ.get(PASSWORD_ENV, "")
    return {"user": user, "password": password} if user or password else {}


def redacted(url: str) -> str:
    """The URL without its user and password, for logs."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ConnectionEvents:
    """The client's callbacks: one log line per event, and ``on_state`` told of each change."""

    def __init__(self, who: str, on_state: Callable[[bool], None] | None = None):
        self.who = who
        self.on_state = on_state or (lambda connected: None)
        self.client: Any = None  # set once connected

    async def error(self, exc: Exception) -> None:
        log.warning("%s: NATS: %s", self.who, describe(exc))

    async def disconnected(self) -> None:
        self.on_state(False)
        if self.client is None or not self.client.is_closed:  # closing it ourselves is no loss
            log.warning("%s: lost the NATS connection; reconnecting every %gs", self.who, RECONNECT_WAIT_S)

    async def reconnected(self) -> None:
        log.info("%s: NATS connection back", self.who)
        self.on_state(True)

    async def closed(self) -> None:
        self.on_state(False)


async def connect(url: str, *, name: str, on_state: Callable[[bool], None] | None = None) -> Any:
    """A client connected to ``url`` (raises if the first attempt fails, e.g. wrong credentials)."""
    import nats

    events = ConnectionEvents(name, on_state)
    nc = await nats.connect(
        url,
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=RECONNECT_WAIT_S,
        error_cb=events.error,
        disconnected_cb=events.disconnected,
        reconnected_cb=events.reconnected,
        closed_cb=events.closed,
        **credentials(os.environ),
    )
    events.client = nc
    events.on_state(True)
    return nc
