"""What the inference service answers: its inputs, timings and outcomes (``engine/service.py``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from sie_server.adapters.extractors.gliner2 import SchemaFound
from sie_server.adapters.runtime.options import Entity


@dataclass(frozen=True)
class TextInput:
    """One input: a text, or (for image-text models) an image with optional text."""

    id: str
    text: str
    image: bytes | None = None


@dataclass
class Timing:
    started: float = field(default_factory=time.perf_counter)
    tokenization_ms: float = 0.0
    queue_ms: float = 0.0
    inference_ms: float = 0.0
    cache_hits: int = 0  # items answered from the result cache

    def as_dict(self) -> dict[str, float]:
        return {
            "total_ms": round((time.perf_counter() - self.started) * 1000, 3),
            "queue_ms": round(self.queue_ms, 3),
            "tokenization_ms": round(self.tokenization_ms, 3),
            "inference_ms": round(self.inference_ms, 3),
        }


@dataclass
class EncodeOutcome:
    model: str
    ids: list[str]
    outputs: list[dict[str, np.ndarray]]
    truncated: list[str]
    prompt_tokens: int
    timing: Timing


@dataclass
class ScoreOutcome:
    model: str
    query_id: str
    scores: list[tuple[str, float]]  # (item id, score), best first
    truncated: list[str]
    prompt_tokens: int
    timing: Timing


@dataclass
class ExtractOutcome:
    model: str
    ids: list[str]
    entities: list[list[Entity]]
    timing: Timing
    schema_results: list[SchemaFound] | None = None  # a params.schema request (GLiNER2)
