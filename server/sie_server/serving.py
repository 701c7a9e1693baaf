"""Running an app under uvicorn, with a drain on SIGTERM: ``sie-server serve`` and ``sie-server gateway``.

The first SIGTERM (or SIGINT) stops admitting work — ``/readyz`` answers 503 and work
routes answer 503 QUEUE_FULL — and lets every accepted request finish; then the process
exits with status 0. A drain lasts at most ``--drain-timeout-s``: work unfinished then is
failed with 503 QUEUE_FULL (a stream ends with an error event) and the process exits. A
second signal exits at once, with status 0. What is drained is a ``drain.Drainable``: the
engine's front door on the server, the gateway's service on the gateway.
"""

from __future__ import annotations

import logging
import os
import time
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn
from fastapi import FastAPI
from uvicorn.config import LOGGING_CONFIG

from sie_server.drain import Drainable, overdue
from sie_server.settings import CommonSettings

if TYPE_CHECKING:
    from sie_server.cluster.gateway_settings import GatewaySettings
    from sie_server.settings import Settings

log = logging.getLogger(__name__)
# after the deadline, how long failed answers get to reach their callers before connections are cut
ANSWER_GRACE_S = 5


def _flush_logs() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()


class DrainingServer(uvicorn.Server):
    def __init__(
        self, config: uvicorn.Config, state: Drainable, drain_timeout_s: float | None = None, who: str = "server"
    ):
        super().__init__(config)
        self.app_state = state
        self.drain_timeout_s = drain_timeout_s
        self.who = who  # "server" or "gateway", in the messages callers get
        self.draining = False
        self.deadline: float | None = None
        self.overdue = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.draining:  # a second signal: stop now (unacknowledged queue work is redelivered)
            log.warning("signal %d during the drain: exiting now", sig)
            _flush_logs()
            os._exit(0)
        log.info("signal %d: draining (no new work; finishing what was accepted)", sig)
        self.draining = True
        self.app_state.draining = True
        if self.drain_timeout_s is not None:
            self.deadline = time.monotonic() + self.drain_timeout_s

    def _fail_overdue(self) -> None:
        self.overdue = True
        assert self.drain_timeout_s is not None  # only a drain with a deadline gets here
        failed = self.app_state.fail_unfinished(overdue(self.who, self.drain_timeout_s))
        log.warning("drain deadline passed: failed %d unfinished pieces of work", failed)
        self.config.timeout_graceful_shutdown = ANSWER_GRACE_S
        self.deadline = time.monotonic() + ANSWER_GRACE_S  # then exit, answered or not

    async def on_tick(self, counter: int) -> bool:
        if self.draining and not self.should_exit:
            overdue = self.deadline is not None and time.monotonic() >= self.deadline
            if overdue and not self.overdue:
                self._fail_overdue()
            elif self.app_state.idle() or (self.overdue and (overdue or self.app_state.inflight == 0)):
                log.info("drained; shutting down")
                self.should_exit = True
        return await super().on_tick(counter)


def uvicorn_config(app: FastAPI, settings: CommonSettings) -> uvicorn.Config:
    # An access-log line per request took ~8% of the event loop's time per request under 64
    # clients (formatting and writing it with the GIL held, which the forward pass then waits
    # for); --verbose turns it on, with the debug logs. With --log-format json uvicorn configures no
    # logging of its own: its lines go through the root logger's JSON handler like every other line.
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="debug" if settings.verbose else "info",
        access_log=settings.verbose,
        log_config=None if settings.log_format == "json" else LOGGING_CONFIG,
    )


def run(settings: Settings) -> None:
    from sie_server.compose import create_app  # the engine (and torch) only for `serve`

    app = create_app(settings)
    DrainingServer(uvicorn_config(app, settings), app.state.sie, settings.drain_timeout_s).run()


def run_gateway(settings: GatewaySettings) -> None:
    from sie_server.cluster.gateway_app import create_gateway_app

    app = create_gateway_app(settings)
    DrainingServer(uvicorn_config(app, settings), app.state.drain, settings.drain_timeout_s, who="gateway").run()
