"""BERT-family embedders: mean / cls / last-token pooling, L2 normalisation, prefixes, instructions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sie_server.adapters.base import Tokens
from sie_server.adapters.encoder import TextEncoder
from sie_server.adapters.options import EncodeOptions, EncodeOutput
from sie_server.adapters.precision import apply_cpu_precision
from sie_server.adapters.transformers_base import TransformersAdapter


class EmbeddingAdapter(TransformersAdapter, TextEncoder):
    def _model_class(self) -> Any:
        from transformers import AutoModel

        return AutoModel

    def load(self, weights: Path) -> None:
        super().load(weights)
        self.precision_report = apply_cpu_precision(self)

    def probe_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """The precision gate's probe: one dense vector per text, as ``encode`` returns them."""
        return np.stack([item["dense"] for item in self.run(self.tokenize_texts(list(texts)), EncodeOptions())])

    def format_text(self, text: str, *, is_query: bool, instruction: str | None) -> str:
        runtime = self.config.runtime
        if instruction:
            return runtime.instruction_template.format(instruction=instruction, text=text)
        return (runtime.query_prefix if is_query else runtime.doc_prefix) + text

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[EncodeOutput]:
        inputs = self.pad(batch)
        with torch.inference_mode():
            hidden = self.model(**inputs).last_hidden_state
            if self.precision == "bf16":  # the CPU gate chose bf16: pool and normalise in float32
                hidden = hidden.float()
            pooled = self._pool(hidden, inputs["attention_mask"])
            if self.config.runtime.normalize:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        vectors: np.ndarray = pooled.float().cpu().numpy()
        return [{"dense": row} for row in vectors]

    def _pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        pooling = self.config.runtime.pooling
        if pooling == "cls":
            return hidden[:, 0]
        if pooling == "last_token":
            last = mask.sum(dim=1) - 1
            return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
