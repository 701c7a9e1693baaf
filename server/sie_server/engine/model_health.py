"""What ``/readyz`` says about the models, beyond starting and draining: which cannot serve now, and why.

Kubernetes takes a pod whose readiness probe fails out of its Service (no new requests reach it) and
restarts a pod whose liveness probe fails. So the two probes answer different questions here:

- ``/healthz`` (liveness) says only that the process answers: it is served on the event loop, which no
  model runs on, so it stays fast under any batch, however long or wedged. Restarting a pod because
  one batch is slow would lose every request in it and load every model again.
- ``/readyz`` (readiness) is 503 ``"failing"`` when the pod cannot do what it was started for, and
  names each model that cannot serve in ``models`` (its ``problem``, a ``message`` and whether it is
  ``required``), also while it stays 200:

  * ``load_failed``: the model's last load failed (weights missing or broken; remembered until its
    config changes or a reload). This makes the pod unready only for a *required* model, one named by
    ``--pin`` or ``--preload``. A failed load is the same on every replica, so taking pods out of the
    Service for an optional model would stop every other model on every replica, while its own callers
    already get 502 MODEL_LOAD_FAILED at once, not a hang; it is listed, and counted in
    ``sie_requests_total``. A required model that cannot load means the pod does not serve what it was
    deployed for, and a rolling update whose new pods cannot load it halts there while the old pods go
    on serving.
  * ``stalled``: a batch of the model has run longer than ``--stall-after-s`` (default 120 s) on its
    lane's thread, or its decode loop has not finished a step for that long. A lane serves every model of
    its priority class, so work of every model waits behind a wedged batch: the pod is unready until the
    batch ends (it becomes ready again by itself then). A lane thread cannot die of a model's exception
    (``compute_thread._do`` catches everything and the batch's items get the error); what it can do is
    never return, which is this check.
  * ``stopped`` (named ``*``): the scheduler's batch loop has ended, so no batch would ever run again.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Literal

from sie_server.contract.state_wire import ModelProblem, Readiness
from sie_server.engine.generation import GenerationService
from sie_server.engine.scheduler import Scheduler
from sie_server.memory.pool import ModelPool
from sie_server.memory.slots import ModelState

Problem = Literal["load_failed", "stalled"]


class ModelHealth:
    """Judges a ready server's models for ``/readyz`` (``judge``); reads the pool, the lanes and the decode loops."""

    def __init__(
        self,
        pool: ModelPool,
        scheduler: Scheduler,
        generation: GenerationService,
        *,
        required: Iterable[str],
        stall_after_s: float,
    ):
        self.pool = pool
        self.scheduler = scheduler
        self.generation = generation
        self.required = frozenset(required)
        self.stall_after_s = stall_after_s
        self._steps: dict[str, tuple[int, float]] = {}  # decode loop -> (steps seen, since when)

    def problems(self) -> dict[str, ModelProblem]:
        found: dict[str, ModelProblem] = {}
        for slot in self.pool.slots():
            if slot.state is ModelState.FAILED:
                message = slot.error or f"model {slot.config.id} failed to load"
                found[slot.config.id] = self._problem(slot.config.id, "load_failed", message)
        now = time.monotonic()
        for model_id, started in self.scheduler.running():
            if started and now - started > self.stall_after_s:
                message = f"a batch has run for {now - started:.0f} s (--stall-after-s {self.stall_after_s:g})"
                found[model_id] = self._problem(model_id, "stalled", message, always=True)
        for model_id, seconds in self._stalled_decoding(now):
            message = f"no decode step has finished for {seconds:.0f} s (--stall-after-s {self.stall_after_s:g})"
            found[model_id] = self._problem(model_id, "stalled", message, always=True)
        ended = self.scheduler.loop_ended()
        if ended is not None:
            message = f"the batch loop ended ({type(ended).__name__}: {ended}); no batch runs"
            found["*"] = ModelProblem(problem="stopped", message=message, required=True)
        return found

    def _problem(self, model_id: str, problem: Problem, message: str, *, always: bool = False) -> ModelProblem:
        """``always``: the problem holds up every model of its lane, so it counts whoever the model is."""
        return ModelProblem(problem=problem, message=message, required=always or model_id in self.required)

    def _stalled_decoding(self, now: float) -> list[tuple[str, float]]:
        """Decode loops with sequences whose step count has not moved for longer than the bound (their model
        resident: a load is the pool's state, not a stall)."""
        stalled = []
        for model_id, loop in list(self.generation.loops.items()):
            slot = self.pool.peek(model_id)
            if not loop.busy or slot is None or slot.state is not ModelState.LOADED:
                self._steps.pop(model_id, None)
                continue
            steps, since = self._steps.get(model_id, (-1, now))
            if steps != loop.steps:
                self._steps[model_id] = (loop.steps, now)
            elif now - since > self.stall_after_s:
                stalled.append((model_id, now - since))
        return stalled

    def judge(self, ready: Readiness) -> Readiness:
        """``ready`` (a server that is up) with its models' problems; ``failing`` if one of them is required."""
        if ready.status != "ready":
            return ready
        found = self.problems()
        if not found:
            return ready
        failing = any(p.required for p in found.values())
        return ready.model_copy(update={"status": "failing" if failing else "ready", "models": found})
