"""What a drain needs from the process it shuts down, written once for the server and the gateway.

``serving.DrainingServer`` drives a drain over a ``Drainable``: the engine's front door
(``engine/frontdoor.py``) on ``sie-server serve``, the gateway's service
(``cluster/gateway_service.py``) on ``sie-server gateway``. While ``draining`` the process
refuses new work with ``shutting_down()``; at the deadline what is left is failed with
``overdue()``.
"""

from __future__ import annotations

from typing import Protocol

from sie_server.errors import QueueFull, SIEError

DRAIN_RETRY_AFTER_S = 5.0


class Drainable(Protocol):
    draining: bool  # set by the drain: refuse new work, /readyz answers 503

    @property
    def inflight(self) -> int:
        """Work requests being answered now (streams until their last event)."""
        ...

    def idle(self) -> bool:
        """Nothing accepted is left to answer."""
        ...

    def fail_unfinished(self, error: SIEError) -> int:
        """Fail every accepted piece of work still unanswered with ``error``; how many were failed."""
        ...


def shutting_down(who: str) -> QueueFull:
    """What new work gets during a drain."""
    return QueueFull(f"the {who} is shutting down and accepts no new work", retry_after=DRAIN_RETRY_AFTER_S)


def overdue(who: str, drain_timeout_s: float) -> QueueFull:
    """What work still unfinished at the drain's deadline gets."""
    message = (
        f"the {who} shut down before this work finished (its drain lasts at most {drain_timeout_s:g}s, "
        "--drain-timeout-s); retry on another server"
    )
    return QueueFull(message, retry_after=DRAIN_RETRY_AFTER_S)
