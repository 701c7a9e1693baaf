"""BERT-family embedders: mean / cls / last-token pooling, L2 normalisation, prefixes, instructions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import LongTextEncoder, TextLayout
from sie_server.adapters.runtime.options import EncodeOptions, EncodeOutput
from sie_server.adapters.runtime.precision import apply_cpu_precision
from sie_server.adapters.runtime.st_modules import NO_HEADS, Heads, load_heads
from sie_server.adapters.runtime.transformers_base import TransformersAdapter


class EmbeddingAdapter(TransformersAdapter, LongTextEncoder):
    #: sentence-transformers Dense / Normalize modules after pooling (modules.json), applied to every vector
    heads: Heads = NO_HEADS

    def _model_class(self) -> Any:
        from transformers import AutoModel

        return AutoModel

    def load(self, weights: Path) -> None:
        super().load(weights)
        self.heads = load_heads(weights, self.device)
        found, declared = [layer.out_features for layer in self.heads.dense], self.config.runtime.dense_heads
        if declared and found != declared:
            raise ValueError(f"{weights}: modules.json's Dense modules put out {found}, the config declares {declared}")
        self.precision_report = apply_cpu_precision(self)

    def unload(self) -> None:
        super().unload()
        self.heads = NO_HEADS

    def resident_bytes(self) -> int:
        return super().resident_bytes() + self.heads.nbytes()

    def probe_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """The precision gate's probe: one dense vector per text, as ``encode`` returns them."""
        return np.stack([item["dense"] for item in self.run(self.tokenize_texts(list(texts)), EncodeOptions())])

    def format_text(self, text: str, *, is_query: bool, instruction: str | None) -> str:
        runtime = self.config.runtime
        if instruction:
            return runtime.instruction_template.format(instruction=instruction, text=text)
        return (runtime.query_prefix if is_query else runtime.doc_prefix) + text

    @property
    def pools_spans(self) -> bool:
        return self.config.runtime.pooling == "mean"

    @property
    def sees_long_texts(self) -> bool:
        """True unless a subclass changed the tokenization without changing ``long_tokens`` to match."""
        cls = type(self)
        return (
            cls.tokenize_texts is TransformersAdapter.tokenize_texts
            or cls.long_tokens is not EmbeddingAdapter.long_tokens
        )

    def long_tokens(self, texts: list[str], *, is_query: bool, instruction: str | None) -> list[Tokens]:
        # where the caller's text starts in the formatted one (after a prefix or an instruction)
        shift = len(self.format_text("\x00", is_query=is_query, instruction=instruction).split("\x00")[0])
        formatted = [self.format_text(t, is_query=is_query, instruction=instruction) for t in texts]
        tokens = []
        for e in self.untruncated(formatted):
            marks = zip(e.special_tokens_mask, e.offsets, strict=True)
            own = [not special and end > shift for special, (_, end) in marks]
            lead = own.index(True) if any(own) else len(own)
            trail = own[::-1].index(True) if any(own) else 0
            starts = [max(start - shift, 0) if mine else -1 for mine, (start, _) in zip(own, e.offsets, strict=True)]
            layout = TextLayout(lead=lead, trail=trail, starts=starts)
            types = list(e.type_ids) if self._uses_token_types else None
            tokens.append(Tokens(input_ids=list(e.ids), token_type_ids=types, truncated=False, data=layout))
        return tokens

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[EncodeOutput]:
        inputs = self.pad(batch)
        if options.lora_task is not None:  # jina-embeddings-v3: each row's adapter index, as the model's code takes it
            task = self.config.runtime.lora_tasks.index(options.lora_task)
            inputs["adapter_mask"] = torch.full((len(batch),), task, dtype=torch.int32, device=self.device)
        normalize = self.config.runtime.normalize or self.heads.normalize
        with torch.inference_mode():
            hidden = self.model(**inputs).last_hidden_state
            if self.precision == "bf16":  # the CPU gate chose bf16: pool and normalise in float32
                hidden = hidden.float()
            pooled = self.heads(self._pool(hidden, inputs["attention_mask"]))
            if normalize:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
            spans = [
                self._spans(hidden[row], t.data, normalize, self.heads)
                for row, t in enumerate(batch)
                if options.late_chunks
            ]
        vectors: np.ndarray = pooled.float().cpu().numpy()
        if not options.late_chunks:
            return [{"dense": row} for row in vectors]
        return [{"dense": row, "chunks": chunks} for row, chunks in zip(vectors, spans, strict=True)]

    @staticmethod
    def _spans(hidden: torch.Tensor, ranges: Any, normalize: bool, heads: Heads = NO_HEADS) -> np.ndarray:
        """Late chunking: the mean of the token vectors in each ``(first, stop)`` token range (through the heads)."""
        if not isinstance(ranges, list) or not ranges:
            width = heads.dense[-1].out_features if heads.dense else hidden.shape[-1]
            return np.zeros((0, width), np.float32)
        pooled = heads(torch.stack([hidden[first:stop].mean(dim=0) for first, stop in ranges]))
        if normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        out: np.ndarray = pooled.float().cpu().numpy()
        return out

    def _pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        pooling = self.config.runtime.pooling
        if pooling == "cls":
            return hidden[:, 0]
        if pooling == "last_token":
            last = mask.sum(dim=1) - 1
            return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
