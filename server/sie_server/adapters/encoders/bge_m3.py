"""BGE-M3: one forward pass gives dense (CLS), sparse (per-token weights) and multivector (ColBERT) outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from sie_server.adapters.encoders.splade import to_sparse
from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import TextEncoder
from sie_server.adapters.runtime.options import EncodeOptions, EncodeOutput
from sie_server.adapters.runtime.transformers_base import TransformersAdapter


def _linear(path: Path, hidden: int, out: int, dtype: torch.dtype, device: str) -> torch.nn.Linear:
    layer = torch.nn.Linear(hidden, out)
    layer.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return layer.to(device, dtype).eval()


class BgeM3Adapter(TransformersAdapter, TextEncoder):
    sparse_linear: torch.nn.Linear | None = None
    colbert_linear: torch.nn.Linear | None = None

    def _model_class(self) -> Any:
        from transformers import AutoModel

        return AutoModel

    def load(self, weights: Path) -> None:
        super().load(weights)
        hidden = int(self.model.config.hidden_size)
        dtype = self.model.dtype
        self.sparse_linear = _linear(weights / "sparse_linear.pt", hidden, 1, dtype, self.device)
        self.colbert_linear = _linear(weights / "colbert_linear.pt", hidden, hidden, dtype, self.device)
        self.vocab_size = int(self.model.config.vocab_size)

    def unload(self) -> None:
        self.sparse_linear = self.colbert_linear = None
        super().unload()

    def resident_bytes(self) -> int:
        heads = [m for m in (self.sparse_linear, self.colbert_linear) if m is not None]
        extra = sum(p.numel() * p.element_size() for m in heads for p in m.parameters())
        return super().resident_bytes() + extra

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[EncodeOutput]:
        wanted = set(options.output_types)
        inputs = self.pad(batch)
        results: list[EncodeOutput] = [{} for _ in batch]
        with torch.inference_mode():
            hidden = self.model(**inputs).last_hidden_state
            if "dense" in wanted:
                dense = torch.nn.functional.normalize(hidden[:, 0].float(), dim=-1).cpu().numpy()
                for row, vector in enumerate(dense):
                    results[row]["dense"] = vector
            if "sparse" in wanted and self.sparse_linear is not None:
                weights = torch.relu(self.sparse_linear(hidden)).squeeze(-1).float().cpu().numpy()
                for row, tokens in enumerate(batch):
                    terms = np.zeros(self.vocab_size, dtype=np.float32)
                    for position, token in enumerate(tokens.input_ids):
                        if token not in self._special_ids:
                            terms[token] = max(terms[token], weights[row, position])
                    results[row]["sparse"] = to_sparse(terms)
            if "multivector" in wanted and self.colbert_linear is not None:
                projected = torch.nn.functional.normalize(self.colbert_linear(hidden[:, 1:]).float(), dim=-1)
                vectors = projected.cpu().numpy()
                for row, tokens in enumerate(batch):
                    results[row]["multivector"] = vectors[row, : tokens.length - 1]
        return results
