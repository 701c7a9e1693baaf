"""A model load's stages as it goes: logged as each begins and ends, read by ``/v1/models``.

Stages: resolving weights (finding them, downloading when allowed), planning memory (estimate,
evictions), reading weights (the adapter's load: reading, converting, moving to the device),
warming up (one batch through the model). A stage's end is logged with its seconds; the whole
load's end is the pool's "loaded ... in" line.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum

log = logging.getLogger("sie_server.memory.pool")


class LoadStage(StrEnum):
    RESOLVING = "resolving weights"
    PLANNING = "planning memory"
    READING = "reading weights"
    WARMING = "warming up"


@dataclass
class LoadProgress:
    model_id: str
    stage: LoadStage = LoadStage.RESOLVING
    detail: str | None = None
    fraction: float | None = None  # of the current stage, where it is known
    started: float = field(default_factory=time.monotonic)
    stage_started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        log.info("loading %s: %s", self.model_id, self.stage.value)

    def enter(self, stage: LoadStage, detail: str | None = None) -> None:
        """The current stage is over (logged with its seconds); ``stage`` begins."""
        now = time.monotonic()
        log.info(
            "loading %s: %s took %.2fs; %s%s",
            self.model_id,
            self.stage.value,
            now - self.stage_started,
            stage.value,
            f" ({detail})" if detail else "",
        )
        self.stage, self.detail, self.fraction, self.stage_started = stage, detail, None, now

    def elapsed(self) -> tuple[float, float]:
        """Seconds since the load began, and since the current stage began."""
        now = time.monotonic()
        return now - self.started, now - self.stage_started

    def finish(self) -> None:
        """The last stage is over: logged with its seconds and the whole load's."""
        elapsed, in_stage = self.elapsed()
        log.info("loading %s: %s took %.2fs; done in %.2fs", self.model_id, self.stage.value, in_stage, elapsed)
