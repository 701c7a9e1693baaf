"""Shared plumbing for adapters built on Hugging Face transformers: tokenizer, padding, dtype."""

from __future__ import annotations

import gc
from abc import abstractmethod
from pathlib import Path
from typing import Any

import torch
from tokenizers import Encoding, Tokenizer

from sie_server.adapters.runtime.base import ModelAdapter, Tokens
from sie_server.adapters.runtime.precision import packed_bytes
from sie_server.adapters.runtime.text_tokens import TokenSpan, hf_spans, hf_texts, whole
from sie_server.cpu_features import Precision

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class TransformersAdapter(ModelAdapter):
    """Loads a fast tokenizer and a ``transformers`` model; subclasses choose the model class and
    the family interface (``TextEncoder``, ``PairScorer``...) whose ``run`` they implement."""

    model: Any = None
    #: what the CPU precision gate converted ``model`` to (fp32: not converted; the profile's dtype applies)
    precision: Precision = "fp32"
    _tokenizer: Tokenizer | None = None
    _whole_tokenizer: Tokenizer | None = None  # the same tokenizer without the length limit
    _pad_id: int = 0
    _uses_token_types: bool = False
    _special_ids: frozenset[int] = frozenset()
    max_length: int = 0

    @abstractmethod
    def _model_class(self) -> Any:
        """The ``transformers`` auto class that loads this family's weights."""

    def load(self, weights: Path) -> None:
        from transformers import AutoTokenizer

        fast = AutoTokenizer.from_pretrained(str(weights), trust_remote_code=self.remote_code)
        if not getattr(fast, "is_fast", False):
            raise ValueError(f"{weights}: a fast (tokenizers) tokenizer is required")
        model = self._model_class().from_pretrained(
            str(weights),
            dtype=DTYPES[self.profile.dtype],
            attn_implementation=self.profile.attn,
            trust_remote_code=self.remote_code,
        )
        model.to(self.device).eval()
        limit = getattr(model.config, "max_position_embeddings", None) or self.config.max_sequence_length
        # RoBERTa-style position ids start after the padding index
        if getattr(model.config, "model_type", "") in {"roberta", "xlm-roberta", "camembert"}:
            limit -= getattr(model.config, "pad_token_id", 1) + 1
        self.max_length = min(self.config.max_sequence_length, int(limit))
        tokenizer = Tokenizer.from_str(fast.backend_tokenizer.to_str())
        tokenizer.no_padding()
        tokenizer.enable_truncation(self.max_length)
        self._tokenizer = tokenizer
        self._whole_tokenizer = whole(fast.backend_tokenizer)
        self._pad_id = int(fast.pad_token_id if fast.pad_token_id is not None else 0)
        self._uses_token_types = "token_type_ids" in fast.model_input_names
        self._special_ids = frozenset(int(i) for i in fast.all_special_ids)
        self.model = model

    def unload(self) -> None:
        """Drop the weights; the tokenizer stays (it is small and requests in flight may still use it)."""
        self.model = None
        gc.collect()
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()

    def resident_bytes(self) -> int:
        if self.model is None:
            return 0
        tensors = [*self.model.parameters(), *self.model.buffers()]
        return int(sum(t.numel() * t.element_size() for t in tensors)) + packed_bytes(self.model)

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            raise RuntimeError("adapter used before load()")
        return self._tokenizer

    def _to_tokens(self, encodings: list[Encoding]) -> list[Tokens]:
        return [
            Tokens(
                input_ids=list(e.ids),
                token_type_ids=list(e.type_ids) if self._uses_token_types else None,
                truncated=bool(e.overflowing),
            )
            for e in encodings
        ]

    def tokenize_texts(self, texts: list[str]) -> list[Tokens]:
        return self._to_tokens(self.tokenizer.encode_batch(texts))

    def untruncated(self, texts: list[str]) -> list[Encoding]:
        """Texts tokenized with every token kept (the model's limit not applied)."""
        if self._whole_tokenizer is None:
            raise RuntimeError("adapter used before load()")
        return list(self._whole_tokenizer.encode_batch(texts))

    # the text tokenizer exposed (runtime/text_tokens.py's TextTokenizer): the whole text, no length limit
    def token_spans(self, texts: list[str], *, add_special_tokens: bool) -> list[list[TokenSpan]]:
        if self._whole_tokenizer is None:
            raise RuntimeError("adapter used before load()")
        return hf_spans(self._whole_tokenizer, texts, add_special_tokens=add_special_tokens)

    def vocabulary_size(self) -> int:
        return int(self.tokenizer.get_vocab_size(with_added_tokens=True))

    def detokenize(self, ids: list[list[int]], *, skip_special_tokens: bool) -> list[str]:
        return hf_texts(self.tokenizer, ids, skip_special_tokens=skip_special_tokens)

    def tokenize_pairs(self, query: str, documents: list[str], instruction: str | None = None) -> list[Tokens]:
        return self._to_tokens(self.tokenizer.encode_batch([(query, d) for d in documents]))

    def pad(self, batch: list[Tokens]) -> dict[str, torch.Tensor]:
        """Right-pad a batch to its own longest item."""
        width = max(t.length for t in batch)
        ids = torch.full((len(batch), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        types = torch.zeros((len(batch), width), dtype=torch.long) if self._uses_token_types else None
        for row, t in enumerate(batch):
            ids[row, : t.length] = torch.tensor(t.input_ids, dtype=torch.long)
            mask[row, : t.length] = 1
            if types is not None and t.token_type_ids is not None:
                types[row, : t.length] = torch.tensor(t.token_type_ids, dtype=torch.long)
        inputs = {"input_ids": ids.to(self.device), "attention_mask": mask.to(self.device)}
        if types is not None:
            inputs["token_type_ids"] = types.to(self.device)
        return inputs
