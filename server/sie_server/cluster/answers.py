"""What a worker remembers of the calls it answered lately, so a second copy of a call is not run again.

A copy of work already answered reaches a worker when the gateway sends a call again after a lost
NATS connection (the answer went out while the gateway was away: the work message was taken, the
answer lost), or when a delivery is redelivered after its answer went out. The worker keeps each
answer's reply messages, as published, for ``KEEP_S`` and within ``MAX_BYTES`` (a by-reference
body's object stays in the payload store; the message names it). A copy of a call remembered here
is answered from memory and acknowledged; a copy of a call being worked on here now is dropped (the
work in hand answers). A copy that reaches another worker is still run there: only the worker that
answered remembers it (the gateway asks the pool for a remembered answer before sending again).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

KEEP_S = 60.0  # past a gateway's wait for NATS to come back (10 s) plus its reply grace, and an ack wait
MAX_BYTES = 16 * 1024 * 1024  # a bounded, quickly reached plateau of memory under load
MAX_CALLS = 4096


@dataclass
class _Answer:
    seq: int = 0  # the stream sequence of the work message being answered
    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    at: float = 0.0


class RecentAnswers:
    """Reply subject -> the reply messages published for it, oldest forgotten first."""

    def __init__(self, *, keep_s: float = KEEP_S, max_bytes: int = MAX_BYTES, max_calls: int = MAX_CALLS):
        self.keep_s, self.max_bytes, self.max_calls = keep_s, max_bytes, max_calls
        self._done: OrderedDict[str, _Answer] = OrderedDict()
        self._open: dict[str, _Answer] = {}  # answers being published now
        self._bytes = 0

    def working(self, reply_to: str) -> int | None:
        """The stream sequence of the work message for ``reply_to`` being answered here now, or None."""
        answer = self._open.get(reply_to)
        return None if answer is None else answer.seq

    def begin(self, reply_to: str, seq: int) -> None:
        self._open[reply_to] = _Answer(seq)

    def add(self, reply_to: str, packed: bytes) -> None:
        """One reply message published for a call begun here."""
        answer = self._open.get(reply_to)
        if answer is not None:
            answer.parts.append(packed)
            answer.size += len(packed)

    def end(self, reply_to: str, *, complete: bool) -> None:
        """The call is answered (``complete``: every part went out), or given up (nothing to replay)."""
        answer = self._open.pop(reply_to, None)
        if answer is None or not complete or not answer.parts or answer.size > self.max_bytes:
            return
        answer.at = time.monotonic()
        self._done.pop(reply_to, None)
        self._done[reply_to] = answer
        self._bytes += answer.size
        self._expire()

    def replay(self, reply_to: str) -> list[bytes] | None:
        """The reply messages of a call answered here lately, or None."""
        self._expire()
        answer = self._done.get(reply_to)
        return None if answer is None else list(answer.parts)

    def _expire(self) -> None:
        stale = time.monotonic() - self.keep_s
        while self._done:
            oldest = next(iter(self._done.values()))
            if oldest.at > stale and self._bytes <= self.max_bytes and len(self._done) <= self.max_calls:
                return
            _, gone = self._done.popitem(last=False)
            self._bytes -= gone.size
