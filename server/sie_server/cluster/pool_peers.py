"""The other workers of a worker's pool, as their heartbeats tell it, and the rule that uses them: a worker
whose own ``/readyz`` names a problem (a pinned model that cannot load, a wedged batch; ``engine/model_health.py``)
stops taking the pool's shared work and batch lines while another live worker of the pool names none.

The gateway already stops sending a worker the work of a model it names (``cluster/gateway_workers.py``), but
work on the pool's shared consumer goes to whichever worker fetches first: a worker with a wedged lane would take
its share and hold it until the callers' deadlines. Like an unready pod that Kubernetes takes out of a Service, it
steps aside, and still answers work sent to it by name (models it holds and serves). With no ready peer it goes on
taking shared work: an answer from a degraded worker beats none.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from sie_server.cluster.gateway_workers import WorkerSeen

log = logging.getLogger(__name__)

PEER_TTL_S = 6.0  # a peer not heard from this long is gone (heartbeats come every 2 s; the gateway's TTL)
RECHECK_S = 0.5  # how long a decision stands: the pull loops ask on every fetch


class PoolPeers:
    """Heartbeats of the pool's other workers (subscribe ``on_beat`` to the pool's heartbeat subject)."""

    def __init__(self, pool: str, me: str, problems: Callable[[], dict[str, Any]]) -> None:
        self.pool = pool
        self.me = me
        self._problems = problems  # this worker's own /readyz problems
        self.seen: dict[str, WorkerSeen] = {}
        self._decided: tuple[float, bool] = (-RECHECK_S, False)

    async def on_beat(self, msg: Any) -> None:
        try:
            beat = json.loads(msg.data)
            seen = WorkerSeen.from_beat(beat)
        except (ValueError, KeyError, TypeError):
            return
        if beat.get("worker") != self.me and seen.pool == self.pool:
            self.seen[str(beat["worker"])] = seen
            # workers come and go (a restart is a new id): forget those gone, so the map stays the live pool's
            self.seen = {w: s for w, s in self.seen.items() if seen.seen - s.seen < PEER_TTL_S}

    def ready_peer(self) -> bool:
        """Whether another live worker of the pool is taking work and names no problem."""
        now = time.monotonic()
        return any(now - s.seen < PEER_TTL_S and not s.stopping and not s.problems for s in self.seen.values())

    def stand_aside(self) -> bool:
        """Whether this worker leaves the shared work to its peers now: its ``/readyz`` names a problem and a
        ready peer is there to take the work."""
        now = time.monotonic()
        at, aside = self._decided
        if now - at < RECHECK_S:
            return aside
        problems = self._problems() if self.ready_peer() else {}
        now_aside = bool(problems)
        if now_aside != aside:
            if now_aside:
                log.warning("worker %s: stepping aside from the pool's shared work while a ready peer takes it "
                            "(its /readyz names %s)", self.me, ", ".join(sorted(problems)))  # fmt: skip
            else:
                log.info("worker %s: taking the pool's shared work again", self.me)
        self._decided = (now, now_aside)
        return now_aside
