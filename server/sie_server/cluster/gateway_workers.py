"""A worker as the gateway sees it, from its last heartbeat: its pool, its models, its load, and what its
own ``/readyz`` says of its models (``engine/model_health.py``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from sie_server.contract.state_wire import ModelProblem

EVERY_MODEL = "*"  # a problem under this name (the worker's batch loop ended) holds every model of the worker


@dataclass
class WorkerSeen:
    pool: str
    seen: float
    models: dict[str, dict[str, Any]]  # model id -> its /v1/models entry on that worker
    inflight: int
    stopping: bool = False  # draining: takes no new work of its own
    batch_inflight: int = 0  # its --batch-inflight: batch lines it runs at once at most
    problems: dict[str, ModelProblem] = field(default_factory=dict)  # the models its /readyz names, and why

    @classmethod
    def from_beat(cls, beat: dict[str, Any]) -> WorkerSeen:
        return cls(beat["pool"], time.monotonic(), beat.get("models", {}), int(beat.get("inflight", 0)),
                   bool(beat.get("stopping", False)), int(beat.get("batch_inflight", 0)),
                   _problems(beat.get("problems")))  # fmt: skip

    def serves(self, model_id: str) -> bool:
        """Whether this worker takes the model's work and can answer it: not stopping, and its ``/readyz``
        names no problem of the model (or of every model)."""
        return not self.stopping and model_id not in self.problems and EVERY_MODEL not in self.problems


def _problems(raw: object) -> dict[str, ModelProblem]:
    """The heartbeat's ``problems``; {} from a worker that sends none (an older version) or a malformed one."""
    if not isinstance(raw, dict):
        return {}
    try:
        return {str(model_id): ModelProblem.model_validate(problem) for model_id, problem in raw.items()}
    except ValidationError:
        return {}
