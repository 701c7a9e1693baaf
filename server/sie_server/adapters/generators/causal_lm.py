"""Causal language models on transformers: prompt rendering, batched prefill and one-token decode steps.

The decode loop (engine/decode_loop.py) owns the batch; this adapter only runs the model on
it. A batch is left-padded: row ``i`` holds its real tokens at the right end of the mask.
"""

from __future__ import annotations

import gc
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from sie_server.adapters.generators.torch_prefix import keep_read, read_from
from sie_server.adapters.runtime.generator import Detokenizer, Generator, WindowDetokenizer
from sie_server.adapters.runtime.prefix_cache import PrefixCache
from sie_server.adapters.runtime.text_tokens import TokenSpan, hf_spans, hf_texts, whole
from sie_server.adapters.runtime.token_bytes import fallback_chat, hf_max_token_bytes, rendered_roles
from sie_server.adapters.runtime.transformers_base import DTYPES


@dataclass
class DecodeBatch:
    """The running batch: its KV cache and attention mask (rows x cached length)."""

    cache: Any
    mask: torch.Tensor

    @property
    def rows(self) -> int:
        return int(self.mask.shape[0])


def _left_pad(tensor: torch.Tensor, length: int, dim: int, value: float = 0) -> torch.Tensor:
    missing = length - tensor.shape[dim]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([torch.full(shape, value, dtype=tensor.dtype, device=tensor.device), tensor], dim=dim)


class CausalLMAdapter(Generator):
    model: Any = None
    tokenizer: Any = None
    _cache_kwarg: str = "past_key_values"
    _last_logits_only: bool = False
    _grammar_vocab: Any = None
    prefix_cache: PrefixCache | None = None
    _text_tokenizer: Any = None  # the fast tokenizer's own (tokenizers.Tokenizer), unpadded and whole

    def load(self, weights: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(weights), trust_remote_code=self.remote_code)
        loader: Any = AutoModelForCausalLM
        model = loader.from_pretrained(
            str(weights),
            dtype=DTYPES[self.profile.dtype],
            attn_implementation=self.profile.attn,
            trust_remote_code=self.remote_code,
        )
        model.to(self.device).eval()
        eos = model.generation_config.eos_token_id if model.generation_config else None
        eos = eos if eos is not None else self.tokenizer.eos_token_id
        self.eos_ids = frozenset([eos] if isinstance(eos, int) else (eos or []))
        limit = getattr(model.config, "max_position_embeddings", None) or self.config.max_sequence_length
        self.context_length = min(int(limit), self.config.max_sequence_length)
        self.model = model
        self.prefix_cache = PrefixCache(self.profile.prefix_cache_bytes)
        # transformers renamed `past_key_values` to `cache`; use whichever this version takes
        parameters = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in parameters else "past_key_values"
        self._last_logits_only = "logits_to_keep" in parameters
        self.max_token_bytes = hf_max_token_bytes(self.tokenizer)
        self.rendered_roles = rendered_roles(self._chat_text)

    def unload(self) -> None:
        self.model = self._grammar_vocab = None
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        gc.collect()
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()

    def resident_bytes(self) -> int:
        if self.model is None:
            return 0
        return sum(t.numel() * t.element_size() for t in [*self.model.parameters(), *self.model.buffers()])

    def warmup(self) -> None:
        batch, _ = self.prefill([self.prompt_ids("hello", None)])
        self.decode(batch, [self.eos_token_or(0)], [batch.mask.shape[1]])

    def grammar_tokenizer(self) -> Any:
        if self._grammar_vocab is None:
            import llguidance.hf

            width = int(self.model.get_output_embeddings().weight.shape[0])  # the logits' width
            self._grammar_vocab = llguidance.hf.from_tokenizer(
                self.tokenizer, n_vocab=width, eos_token=sorted(self.eos_ids) or None
            )
        return self._grammar_vocab

    def eos_token_or(self, default: int) -> int:
        return next(iter(sorted(self.eos_ids)), default)

    # ----- prompts ----------------------------------------------------------------------------
    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def _chat_text(self, messages: list[dict[str, str]]) -> str:
        """A chat as the text ``prompt_ids`` tokenizes (for the load-time template probe)."""
        if not self.has_chat_template:
            return fallback_chat(messages)
        return str(self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))

    def chat_template_text(self) -> str | None:
        template = getattr(self.tokenizer, "chat_template", None)
        return template if isinstance(template, str) else None

    def prompt_ids(
        self, prompt: str | None, messages: list[dict[str, Any]] | None, template_args: Mapping[str, Any] | None = None
    ) -> list[int]:
        if messages is not None:
            if not self.has_chat_template:
                return list(self.tokenizer(fallback_chat(messages), add_special_tokens=True)["input_ids"])
            rendered = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, **(template_args or {})
            )
            ids = rendered["input_ids"] if isinstance(rendered, dict) or hasattr(rendered, "keys") else rendered
            return [int(i) for i in ids]
        return list(self.tokenizer(prompt or "", add_special_tokens=True)["input_ids"])

    def decode_text(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    # the text tokenizer exposed (runtime/text_tokens.py's TextTokenizer)
    def _fast_tokenizer(self) -> Any:
        if self._text_tokenizer is None:
            backend = getattr(self.tokenizer, "backend_tokenizer", None)
            if backend is None:
                raise RuntimeError(f"model {self.config.id} has no fast (tokenizers) tokenizer")
            self._text_tokenizer = whole(backend)
        return self._text_tokenizer

    def token_spans(self, texts: list[str], *, add_special_tokens: bool) -> list[list[TokenSpan]]:
        return hf_spans(self._fast_tokenizer(), texts, add_special_tokens=add_special_tokens)

    def vocabulary_size(self) -> int:
        return int(self._fast_tokenizer().get_vocab_size(with_added_tokens=True))

    def detokenize(self, ids: list[list[int]], *, skip_special_tokens: bool) -> list[str]:
        return hf_texts(self._fast_tokenizer(), ids, skip_special_tokens=skip_special_tokens)

    def detokenizer(self) -> Detokenizer:
        return WindowDetokenizer(self.decode_text)

    # ----- running ----------------------------------------------------------------------------
    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any) -> Any:
        extra: dict[str, Any] = {self._cache_kwarg: cache}
        if self._last_logits_only:
            extra["logits_to_keep"] = 1  # the prompt's other positions' logits are never used
        with torch.inference_mode():
            return self.model(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=positions.to(self.device),
                use_cache=True,
                **extra,
            )

    @staticmethod
    def _cache_of(out: Any) -> Any:
        cache = getattr(out, "cache", None)
        return cache if cache is not None else out.past_key_values

    def prefill(self, prompts: list[list[int]]) -> tuple[DecodeBatch, torch.Tensor]:
        """Run the prompts; the new batch and each row's next-token logits. A prompt sharing a cached prefix
        is read from where it parts (torch_prefix.py); the others together, left-padded."""
        cache = self.prefix_cache
        hits = [cache.lookup(p) for p in prompts] if cache is not None else [(None, 0)] * len(prompts)
        cold = [i for i, (entry, _) in enumerate(hits) if entry is None]
        order, batch, parts = list(cold), None, []
        if cold:
            batch, logits = self._prefill_cold([prompts[i] for i in cold])
            parts.append(logits)
        for i, (entry, reuse) in enumerate(hits):
            if entry is not None:
                kv, mask, logits = read_from(self, prompts[i], entry, reuse)
                batch = self.merge(batch, DecodeBatch(kv, mask))
                order.append(i)
                parts.append(logits)
        assert batch is not None
        if cache is not None and cache.cap_bytes:
            keep_read(cache, batch.cache, [prompts[i] for i in order])
        if order != sorted(order):  # back in the callers' order
            where = [order.index(i) for i in range(len(prompts))]
            kept = self.keep(batch, where)
            assert kept is not None
            return kept, torch.cat(parts)[where]
        return batch, torch.cat(parts)

    def _prefill_cold(self, prompts: list[list[int]]) -> tuple[DecodeBatch, torch.Tensor]:
        width = max(len(p) for p in prompts)
        pad = self.eos_token_or(0)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], dtype=torch.long)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        from transformers import DynamicCache

        out = self._forward(ids, mask, positions, DynamicCache())
        return DecodeBatch(self._cache_of(out), mask), out.logits[:, -1, :].float()

    def decode(self, batch: DecodeBatch, tokens: list[int], positions: list[int]) -> torch.Tensor:
        """One step: feed each row its last token; returns next-token logits and grows the batch."""
        batch.mask = torch.cat([batch.mask, torch.ones((batch.rows, 1), dtype=torch.long)], dim=1)
        ids = torch.tensor(tokens, dtype=torch.long).unsqueeze(1)
        pos = torch.tensor(positions, dtype=torch.long).unsqueeze(1)
        out = self._forward(ids, batch.mask, pos, batch.cache)
        batch.cache = self._cache_of(out)
        logits: torch.Tensor = out.logits[:, -1, :].float()
        return logits

    def merge(self, first: DecodeBatch | None, second: DecodeBatch) -> DecodeBatch:
        """One batch of both, left-padded to the longer cache."""
        if first is None:
            return second
        from transformers import DynamicCache

        length = max(first.mask.shape[1], second.mask.shape[1])
        layers = []
        for a, b in zip(first.cache.layers, second.cache.layers, strict=True):
            keys = torch.cat([_left_pad(a.keys, length, 2), _left_pad(b.keys, length, 2)], dim=0)
            values = torch.cat([_left_pad(a.values, length, 2), _left_pad(b.values, length, 2)], dim=0)
            layers.append((keys, values))
        mask = torch.cat([_left_pad(first.mask, length, 1), _left_pad(second.mask, length, 1)], dim=0)
        return DecodeBatch(DynamicCache(layers), mask)

    def keep(self, batch: DecodeBatch, rows: list[int]) -> DecodeBatch | None:
        """The batch without the finished rows (None when none is left), trimmed of padding
        columns that no remaining row attends to."""
        if not rows:
            return None
        index = torch.tensor(rows, dtype=torch.long)
        batch.cache.batch_select_indices(index.to(batch.cache.layers[0].keys.device))
        mask = batch.mask[index]
        used = mask.sum(0).nonzero()
        lead = int(used[0]) if len(used) else 0
        if lead:
            for layer in batch.cache.layers:
                layer.keys = layer.keys[:, :, lead:, :]
                layer.values = layer.values[:, :, lead:, :]
            mask = mask[:, lead:]
        return DecodeBatch(batch.cache, mask)
