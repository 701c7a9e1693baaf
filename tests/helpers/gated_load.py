"""An embedder whose load waits until a file named OPEN exists beside its weights: a model that stays
in its loading state for as long as a test needs (the test writes OPEN to let it finish)."""

from __future__ import annotations

import time
from pathlib import Path

from sie_server.adapters.encoders.embedding import EmbeddingAdapter

GATE_TIMEOUT_S = 300.0


class GatedLoad(EmbeddingAdapter):
    def load(self, weights: Path) -> None:
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not (weights / "OPEN").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the gate never opened")
            time.sleep(0.05)
        super().load(weights)
