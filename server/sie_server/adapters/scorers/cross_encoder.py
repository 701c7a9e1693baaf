"""Cross-encoders: one relevance logit per (query, document) pair."""

from __future__ import annotations

from typing import Any

import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import PairScorer
from sie_server.adapters.runtime.options import ScoreOptions
from sie_server.adapters.runtime.transformers_base import TransformersAdapter


class CrossEncoderAdapter(TransformersAdapter, PairScorer):
    def _model_class(self) -> Any:
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification

    def run(self, batch: list[Tokens], options: ScoreOptions) -> list[float]:
        inputs = self.pad(batch)
        with torch.inference_mode():
            logits = self.model(**inputs).logits.float()
        # one label: that logit; several: the last one is "relevant"
        scores = logits[:, 0] if logits.shape[-1] == 1 else logits[:, -1]
        if self.config.runtime.activation == "sigmoid":
            scores = torch.sigmoid(scores)
        return [float(s) for s in scores.cpu()]
