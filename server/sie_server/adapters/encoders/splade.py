"""SPLADE sparse encoders: max over tokens of log(1 + relu(MLM logits)), one weight per vocabulary term."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import TextEncoder
from sie_server.adapters.runtime.options import EncodeOptions, EncodeOutput
from sie_server.adapters.runtime.transformers_base import TransformersAdapter


def to_sparse(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices, values) of the non-zero terms, indices ascending."""
    indices = np.flatnonzero(weights).astype(np.int32)
    return indices, weights[indices].astype(np.float32)


class SpladeAdapter(TransformersAdapter, TextEncoder):
    def _model_class(self) -> Any:
        from transformers import AutoModelForMaskedLM

        return AutoModelForMaskedLM

    def format_text(self, text: str, *, is_query: bool, instruction: str | None) -> str:
        runtime = self.config.runtime
        return (runtime.query_prefix if is_query else runtime.doc_prefix) + text

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[EncodeOutput]:
        inputs = self.pad(batch)
        with torch.inference_mode():
            logits = self.model(**inputs).logits
            weights = torch.log1p(torch.relu(logits.float())) * inputs["attention_mask"].unsqueeze(-1)
            pooled = weights.max(dim=1).values.cpu().numpy()
        return [{"sparse": to_sparse(row)} for row in pooled]
