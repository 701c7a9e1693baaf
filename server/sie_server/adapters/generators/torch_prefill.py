"""Long prompts of a llama.cpp model read by torch in float32, their KV cells handed to llama.cpp to decode.

Why: on the 2-core CPUs here llama.cpp reads a Q4_1 prompt at ~200 tokens/s (it has no batched kernel
for Q4_1 on this build), while the same weights, dequantized to float32, go through torch's GEMMs
faster (benchmarks/RESULTS.md, issue 24). Decoding stays on llama.cpp, whose quantized one-row kernels
are the faster ones there. A llamacpp profile turns this on with ``torch_prefill_tokens`` (prompts at
least that long are read by torch); ``--torch-prefill-tokens`` overrides every profile. At load a gate
(torch_prefill_gate.py) keeps it only where the answer stays llama.cpp's and torch reads faster.

How: the GGUF file's own tensors, dequantized at load by the ``gguf`` package, run a Llama forward
written here, so that what the KV cache gets is under this module's control and in llama.cpp's layout
as it is: llama.cpp's GGUF conversion permutes each head's Q/K rows so that its RoPE rotates adjacent
pairs, and so does this forward, so the keys after RoPE are the ones llama.cpp's own prefill writes
(up to rounding). Keys and values are rounded to float16, as llama.cpp's F16 cache holds them, and
attended to as those float16 values here too. The cells go in through llama.cpp's sequence-state API
(llamacpp_state.py); the last position's logits pick the first new token.

Exactness across reads: the prompt is read in chunks of ``CHUNK`` rows at positions that are multiples of
``CHUNK``, each through every layer before the next, so a prompt read after a cached prefix goes through
the same chunks as a cold read, but for the first, which starts where the prefix ends. Its rows give the
cold read's bits when it has a few dozen rows, not when it has one: a 1,500-token prompt read after
prefixes of 37, 100, 300, 333, 601, 650, 700, 1,000 or 1,234 of its tokens (first chunks of 24 to 219 rows)
gave logits equal to the whole read's (0.0), after 255, 511 or 1,499 (one row, the GEMV kernel) up to
0.0067 apart (measured on Zen 3, torch 2.13 CPU). So ``restart`` moves a reused prefix back to a chunk
boundary when its first chunk would have fewer than ``MIN_ROWS`` rows.

Only the Llama architecture (``general.architecture`` llama: SmolLM2, Llama 3 with its RoPE frequency
factors) is read here; any other is a ValueError at load and its prompts stay on llama.cpp. The float32
copy is charged to the model (``resident_bytes``; memory/estimate.py counts it before the load).
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional

from sie_server.adapters.generators.llamacpp_state import SeqState
from sie_server.adapters.runtime.generator import run_steps

log = logging.getLogger(__name__)

CHUNK = 256  # rows read together, at positions that are multiples of it (see the module docstring)
MIN_ROWS = 64  # the fewest rows a first chunk after a reused prefix may have


def restart(reused: int, length: int) -> int:
    """Where to read a prompt of ``length`` tokens from, given a cached prefix of ``reused`` tokens: there, unless
    the first chunk would be shorter than ``MIN_ROWS`` rows; then the chunk boundary before it."""
    first = min(length, (reused // CHUNK + 1) * CHUNK) - reused
    return reused if reused % CHUNK == 0 or first >= MIN_ROWS else reused - reused % CHUNK


@dataclass
class _Layer:
    attn_norm: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    out: torch.Tensor
    ffn_norm: torch.Tensor
    gate: torch.Tensor
    up: torch.Tensor
    down: torch.Tensor


class TorchPrefill:
    """A float32 Llama over a GGUF file's dequantized tensors that reads prompts into llama.cpp's KV layout."""

    def __init__(self, path: Path):
        from gguf import GGUFReader
        from gguf.quants import dequantize

        reader = GGUFReader(path)
        fields = reader.fields
        arch = str(fields["general.architecture"].contents())
        if arch != "llama":
            raise ValueError(f"torch prefill reads the llama architecture, not {arch}")

        def number(key: str) -> Any:
            return fields[f"llama.{key}"].contents()

        self.heads = int(number("attention.head_count"))
        self.kv_heads = int(number("attention.head_count_kv"))
        self.head_dim = int(number("embedding_length")) // self.heads
        if "llama.rope.dimension_count" in fields and int(number("rope.dimension_count")) != self.head_dim:
            raise ValueError("partial rotary embeddings")
        self.eps = float(number("attention.layer_norm_rms_epsilon"))
        self.base = float(number("rope.freq_base")) if "llama.rope.freq_base" in fields else 10000.0
        tensors = {t.name: t for t in reader.tensors}

        def weight(name: str) -> torch.Tensor:
            t = tensors[name]
            shape = tuple(int(n) for n in reversed(t.shape.tolist()))
            floats = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)  # a copy: the file is mapped
            return torch.from_numpy(floats.reshape(shape))

        self.embed = weight("token_embd.weight")
        self.norm = weight("output_norm.weight")
        self.output = weight("output.weight") if "output.weight" in tensors else self.embed
        self.layers = [
            _Layer(*(weight(f"blk.{i}.{part}.weight") for part in _PARTS)) for i in range(int(number("block_count")))
        ]
        factors = weight("rope_freqs.weight") if "rope_freqs.weight" in tensors else None  # Llama 3.1's scaling
        inverse = self.base ** (-torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim)
        self.inverse_freq = (inverse / factors.double() if factors is not None else inverse).float()

    def resident_bytes(self) -> int:
        seen = {id(self.embed): self.embed, id(self.norm): self.norm, id(self.output): self.output}
        seen.update({id(t): t for layer in self.layers for t in layer.__dict__.values()})
        return sum(t.numel() * t.element_size() for t in seen.values())

    def read(
        self, prompt: list[int], prefix: SeqState | None = None, *, all_logits: bool = False
    ) -> tuple[SeqState, torch.Tensor]:
        """The cells of the whole prompt (``prefix``'s first, then the rest read here) and the logits of its
        last position (of every position read here with ``all_logits``)."""
        return run_steps(self.reading(prompt, prefix, all_logits=all_logits))

    @torch.inference_mode()
    def reading(
        self, prompt: list[int], prefix: SeqState | None = None, *, all_logits: bool = False
    ) -> Generator[None, None, tuple[SeqState, torch.Tensor]]:
        """``read`` a chunk per step: it yields after each chunk and returns what ``read`` answers."""
        start = prefix.cells if prefix is not None else 0
        if start >= len(prompt):
            raise ValueError("nothing left to read after the prefix")
        shape = (len(self.layers), len(prompt), self.kv_heads * self.head_dim)
        keys, values = torch.empty(shape, dtype=torch.float16), torch.empty(shape, dtype=torch.float16)
        if prefix is not None:
            keys[:, :start] = torch.from_numpy(np.stack(prefix.keys))
            values[:, :start] = torch.from_numpy(np.stack(prefix.values))
        hidden, at = [], start
        while at < len(prompt):
            end = min(len(prompt), (at // CHUNK + 1) * CHUNK)
            last = self._chunk(prompt, at, end, keys, values)
            hidden.append(last if all_logits else last[-1:])
            at = end
            yield
        rows = torch.cat(hidden) if all_logits else hidden[-1]
        logits = functional.linear(_rms(rows, self.norm, self.eps), self.output)
        state = SeqState(
            np.arange(len(prompt), dtype=np.int32), list(keys.numpy()), list(values.numpy())
        )  # fmt: skip
        return state, logits

    def _chunk(self, prompt: list[int], at: int, end: int, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Rows ``at:end`` through every layer, their keys and values written into ``keys``/``values``;
        their hidden states after the last layer."""
        count, heads, kv_heads, dim = end - at, self.heads, self.kv_heads, self.head_dim
        hidden = self.embed[torch.tensor(prompt[at:end])]
        angles = torch.arange(at, end, dtype=torch.float32)[:, None] * self.inverse_freq[None, :]
        cos, sin = angles.cos(), angles.sin()
        mask = torch.arange(end)[None, :] <= torch.arange(at, end)[:, None]  # each row sees itself and before
        for index, layer in enumerate(self.layers):
            x = _rms(hidden, layer.attn_norm, self.eps)
            q = _rope(functional.linear(x, layer.q).view(count, heads, dim), cos, sin)
            k = _rope(functional.linear(x, layer.k).view(count, kv_heads, dim), cos, sin)
            keys[index, at:end] = k.reshape(count, -1)  # rounded to float16, as llama.cpp keeps them
            values[index, at:end] = functional.linear(x, layer.v)
            seen_k = keys[index, :end].float().view(end, kv_heads, dim).transpose(0, 1)
            seen_v = values[index, :end].float().view(end, kv_heads, dim).transpose(0, 1)
            out = functional.scaled_dot_product_attention(
                q.transpose(0, 1), seen_k, seen_v, attn_mask=mask, enable_gqa=True
            )  # fmt: skip
            hidden = hidden + functional.linear(out.transpose(0, 1).reshape(count, -1), layer.out)
            x = _rms(hidden, layer.ffn_norm, self.eps)
            gated = functional.silu(functional.linear(x, layer.gate)) * functional.linear(x, layer.up)
            hidden = hidden + functional.linear(gated, layer.down)
        return hidden


_PARTS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """llama.cpp's RoPE (its "normal" mode): element pairs ``(2i, 2i + 1)`` of each head rotated by
    ``position * inverse_freq[i]``; ``x`` is ``[rows, heads, head_dim]``."""
    pairs = x.view(*x.shape[:-1], -1, 2)
    first, second = pairs[..., 0], pairs[..., 1]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.stack((first * c - second * s, first * s + second * c), dim=-1).flatten(-2)


def load_beside(path: Path, model_id: str) -> TorchPrefill | None:
    """The torch reader for the GGUF file at ``path``, or None (logged) when it cannot read this model."""
    try:
        return TorchPrefill(path)
    except (ValueError, KeyError, OSError) as exc:
        log.warning("%s: long prompts stay on llama.cpp; torch cannot read them: %r", model_id, exc)
        return None
