"""ColBERT late-interaction encoders: one L2-normalised vector per token, and MaxSim scoring."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import TextEncoder
from sie_server.adapters.runtime.options import EncodeOptions, EncodeOutput
from sie_server.adapters.runtime.transformers_base import TransformersAdapter


def _projection(weights: Path) -> torch.Tensor | None:
    """The token projection: `linear.weight` beside the backbone, or a sentence-transformers Dense module."""
    from safetensors import safe_open

    for candidate in (weights / "model.safetensors", weights / "1_Dense" / "model.safetensors"):
        if candidate.is_file():
            with safe_open(str(candidate), framework="pt") as handle:
                for key in handle.keys():  # noqa: SIM118 - safe_open has no __iter__
                    if key.endswith("linear.weight"):
                        tensor: torch.Tensor = handle.get_tensor(key)
                        return tensor
    return None


class ColbertAdapter(TransformersAdapter, TextEncoder):
    projection: torch.Tensor | None = None

    def _model_class(self) -> Any:
        from transformers import AutoModel

        return AutoModel

    def load(self, weights: Path) -> None:
        super().load(weights)
        projection = _projection(weights)
        self.projection = None if projection is None else projection.to(self.device, self.model.dtype)
        vocab = self.tokenizer.get_vocab()
        runtime = self.config.runtime
        self._markers = {
            True: vocab.get(runtime.query_marker) if runtime.query_marker else None,
            False: vocab.get(runtime.doc_marker) if runtime.doc_marker else None,
        }
        self._mask_id = vocab.get("[MASK]", self._pad_id)
        self._skip = {vocab[p] for p in string.punctuation if p in vocab} if runtime.mask_punctuation else set()

    def encode_tokens(self, texts: list[str], *, is_query: bool, instruction: str | None) -> list[Tokens]:
        """Tokens with the role marker after [CLS]; queries padded with [MASK] to a fixed length."""
        runtime = self.config.runtime
        if instruction and is_query:
            texts = [runtime.instruction_template.format(instruction=instruction, text=t) for t in texts]
        marker = self._markers[is_query]
        limit = min(self.max_length, runtime.query_max_length) if is_query else self.max_length
        out = []
        for tokens in self.tokenize_texts(texts):
            ids = list(tokens.input_ids)
            if marker is not None:
                ids = [ids[0], marker, *ids[1:]]
            truncated = tokens.truncated or len(ids) > limit
            if len(ids) > limit:
                ids = [*ids[: limit - 1], ids[-1]]
            if is_query and runtime.query_augment and len(ids) < limit:
                ids = ids + [self._mask_id] * (limit - len(ids))
            out.append(Tokens(ids, None if tokens.token_type_ids is None else [0] * len(ids), truncated))
        return out

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[EncodeOutput]:
        inputs = self.pad(batch)  # a query's [MASK] padding is part of its tokens, so it is attended to
        skip = set() if options.is_query else self._skip  # punctuation is masked in documents only
        with torch.inference_mode():
            hidden = self.model(**inputs).last_hidden_state
            if self.projection is not None:
                hidden = hidden @ self.projection.T
            hidden = torch.nn.functional.normalize(hidden.float(), p=2, dim=-1).cpu().numpy()
        results: list[EncodeOutput] = []
        for row, tokens in enumerate(batch):
            keep = [i for i, t in enumerate(tokens.input_ids) if t not in skip]
            results.append({"multivector": hidden[row, keep].astype(np.float32)})
        return results
