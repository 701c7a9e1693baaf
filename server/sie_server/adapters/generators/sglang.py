"""Causal LMs on SGLang (CUDA only; `pip install -e ".[sglang]"`). Imported only when a cuda profile asks for it.

SGLang reserves a static share of GPU memory for weights and KV cache. The share is not a
hand-set split: it is the model's charge in this server's memory budget (weights plus the
KV reserve for its ``max_batch_tokens``) over the device's total memory, so SGLang and the
encoders the pool holds beside it fit one device together.

Untested in this repository's CI (no GPU there); see docs/deploy/gpu.md for the status.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sie_server.adapters.generators.causal_lm import CausalLMAdapter
from sie_server.adapters.runtime.generator import Sampling, StreamingGenerator
from sie_server.adapters.runtime.token_bytes import hf_max_token_bytes, rendered_roles
from sie_server.memory.estimate import activation_reserve, weights_bytes


class SglangAdapter(CausalLMAdapter, StreamingGenerator):
    """SGLang batches and decodes by itself: the tokenizer and prompt rendering come from
    ``CausalLMAdapter``, the tokens from SGLang's own stream."""

    engine: Any = None
    backend = "sglang"

    def load(self, weights: Path) -> None:
        import sglang
        import torch
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(weights), trust_remote_code=self.remote_code)
        total = torch.cuda.get_device_properties(torch.device(self.device)).total_memory
        charge = weights_bytes(weights, self.profile.dtype) + activation_reserve(
            weights, self.profile.max_batch_tokens, self.config.max_sequence_length, self.profile.dtype
        )
        self.mem_fraction = min(0.9, max(0.02, charge / total))
        self.engine = sglang.Engine(
            model_path=str(weights),
            dtype=self.profile.dtype,
            mem_fraction_static=self.mem_fraction,
            context_length=self.config.max_sequence_length,
            trust_remote_code=self.remote_code,
            log_level="error",
        )
        self.context_length = self.config.max_sequence_length
        self.max_token_bytes = hf_max_token_bytes(self.tokenizer)  # prompt bounds, as CausalLMAdapter.load
        self.rendered_roles = rendered_roles(self._chat_text)
        eos = self.tokenizer.eos_token_id
        self.eos_ids = frozenset([eos] if isinstance(eos, int) else [])
        self._charge = charge

    def unload(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
        self.engine = None
        gc.collect()

    def resident_bytes(self) -> int:
        return int(self._charge) if self.engine is not None else 0

    def warmup(self) -> None:  # SGLang warms itself up when its engine starts
        return None

    async def stream(self, prompt_ids: list[int], params: Sampling) -> AsyncIterator[tuple[str, str | None, int]]:
        """(text delta, finish reason once finished, completion tokens so far) as SGLang produces them."""
        sampling: dict[str, Any] = {
            "max_new_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "frequency_penalty": params.frequency_penalty,
            "presence_penalty": params.presence_penalty,
            "stop": list(params.stop) or None,
        }
        if params.seed is not None:
            sampling["sampling_seed"] = params.seed
        sent = ""
        async for chunk in await self.engine.async_generate(
            input_ids=prompt_ids, sampling_params=sampling, stream=True
        ):
            text, meta = chunk.get("text", ""), chunk.get("meta_info", {})
            delta = text[len(sent) :] if text.startswith(sent) else text
            sent = text if text.startswith(sent) else sent + text
            finish = meta.get("finish_reason")
            reason = None if finish is None else ("length" if finish.get("type") == "length" else "stop")
            yield delta, reason, int(meta.get("completion_tokens", 0))
