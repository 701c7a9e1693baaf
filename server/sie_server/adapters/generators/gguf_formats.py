"""The weight format a GGUF model runs in on this CPU, chosen at load behind a quality gate.

A llamacpp profile lists the formats it allows (``gguf_formats``, e.g. ``[q8_0, as_is]``;
``--gguf-formats`` overrides it for every model). They are tried in order: ``as_is`` is the file as
shipped; another is a copy made once by llama.cpp's own quantizer (``llama_model_quantize``) into the
weights cache, keyed by the source file (path, size, mtime) and the format, with a manifest of its
size and SHA-256 so a truncated or corrupt copy is rebuilt rather than loaded. A copy must pass the
gate: next-token logits of a fixed probe set (precision.PROBE_TEXTS) against the file as shipped,
top-1 agreement at least ``MIN_TOP1`` and mean KL(shipped || copy) at most ``MAX_KL`` nats; and it
must run a RAG-shaped probe (a 512-token prompt, then 16 tokens) faster than the shipped file on
this CPU. The first that passes runs; ``as_is`` is always the last resort. Every refusal is logged
with its figures and kept in the model's report (``/v1/models`` shows it). The gate's figures are
kept beside the copy (per CPU flags and threads), so a later load does not measure again.
"""

from __future__ import annotations

import ctypes
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from sie_server.adapters.generators.llamacpp_context import model_params
from sie_server.adapters.runtime.gguf import cache_root, cached_build, source_key
from sie_server.adapters.runtime.precision import PROBE_TEXTS, PrecisionReport, Trial
from sie_server.cpu_features import detect
from sie_server.errors import ModelLoadFailed

log = logging.getLogger(__name__)

AS_IS = "as_is"
FTYPES = {"q8_0": 7, "q4_0": 2, "f16": 1}  # llama_ftype: LLAMA_FTYPE_MOSTLY_*
MIN_TOP1 = 0.99
MAX_KL = 0.05
SPEED_PROMPT = 512
SPEED_DECODE = 16
MODEL = "model.gguf"
GATE = "gate.json"


@dataclass(frozen=True)
class GateFigures:
    top1: float
    kl: float
    shipped_s: float | None = None  # the RAG-shaped probe's time on the file as shipped (timed once the
    copy_s: float | None = None  # quality gate is passed)

    @property
    def speedup(self) -> float | None:
        return self.shipped_s / self.copy_s if self.shipped_s and self.copy_s else None

    def passes(self, min_top1: float, max_kl: float) -> bool:
        return self.top1 >= min_top1 and self.kl <= max_kl


def copy_path(source: Path, fmt: str, threads: int) -> Path:
    """The copy of ``source`` in ``fmt``, made now unless a sound one is cached."""
    target = cache_root() / "gguf-formats" / f"{source.stem}-{source_key(source)}.{fmt}"
    return cached_build(target, lambda staging: _quantize(source, staging / MODEL, FTYPES[fmt], threads),
                        f"the files of the {fmt} copy of {source.name}") / MODEL  # fmt: skip


def _quantize(source: Path, target: Path, ftype: int, threads: int) -> None:
    import llama_cpp as llama

    params = llama.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = threads
    status = llama.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params))
    if status != 0:
        raise ModelLoadFailed(f"llama.cpp's quantizer could not make a copy of {source.name} (status {status})")


class LlamaProbe:
    """One GGUF file on a small context of its own: logits at every position, and a timed RAG-shaped call."""

    def __init__(self, path: Path, threads: int):
        import llama_cpp as llama

        self.model = llama.llama_model_load_from_file(str(path).encode(), model_params())
        if not self.model:
            raise ModelLoadFailed(f"llama.cpp could not load {path}")
        ctx_params = llama.llama_context_default_params()
        ctx_params.n_ctx = ctx_params.n_batch = ctx_params.n_ubatch = 1024
        ctx_params.n_seq_max = 1
        ctx_params.n_threads = ctx_params.n_threads_batch = threads
        ctx_params.flash_attn_type = llama.LLAMA_FLASH_ATTN_TYPE_ENABLED
        ctx_params.no_perf = True
        self.ctx = llama.llama_init_from_model(self.model, ctx_params)
        if not self.ctx:
            llama.llama_model_free(self.model)
            raise ModelLoadFailed(f"llama.cpp could not create a context for {path}")
        self.vocab = llama.llama_model_get_vocab(self.model)
        self.n_vocab = int(llama.llama_vocab_n_tokens(self.vocab))
        self.batch = llama.llama_batch_init(1024, 0, 1)

    def tokens(self, text: str) -> list[int]:
        import llama_cpp as llama

        data = text.encode()
        room = len(data) + 8
        buffer = (llama.llama_token * room)()
        count = llama.llama_tokenize(self.vocab, data, len(data), buffer, room, True, False)
        return [int(t) for t in buffer[: max(count, 0)]]

    def run(self, tokens: list[int], start: int, *, all_logits: bool) -> np.ndarray:
        import llama_cpp as llama

        for i, token in enumerate(tokens):
            self.batch.token[i], self.batch.pos[i] = token, start + i
            self.batch.n_seq_id[i], self.batch.seq_id[i][0] = 1, 0
            self.batch.logits[i] = all_logits or i == len(tokens) - 1
        self.batch.n_tokens = len(tokens)
        if llama.llama_decode(self.ctx, self.batch) != 0:
            raise ModelLoadFailed("llama.cpp failed on the format gate's probe")
        rows = len(tokens) if all_logits else 1
        out = np.ctypeslib.as_array(llama.llama_get_logits(self.ctx), shape=(rows, self.n_vocab))
        return np.array(out, dtype=np.float32)

    def clear(self) -> None:
        import llama_cpp as llama

        llama.llama_memory_clear(llama.llama_get_memory(self.ctx), True)

    def logits(self, tokens: list[int]) -> np.ndarray:
        self.clear()
        return self.run(tokens, 0, all_logits=True)

    def rag_call_s(self, prompt: list[int]) -> float:
        self.clear()
        started = time.perf_counter()
        token = int(self.run(prompt, 0, all_logits=False)[0].argmax())
        for k in range(SPEED_DECODE):
            token = int(self.run([token], len(prompt) + k, all_logits=False)[0].argmax())
        return time.perf_counter() - started

    def close(self) -> None:
        import llama_cpp as llama

        llama.llama_batch_free(self.batch)
        llama.llama_free(self.ctx)
        llama.llama_model_free(self.model)


def agreement(reference: np.ndarray, candidate: np.ndarray) -> tuple[int, float]:
    """Over rows of next-token logits: in how many the two pick the same token, and the sum of
    KL(reference || candidate) in nats."""
    ref, got = reference.astype(np.float64), candidate.astype(np.float64)
    log_p = ref - np.logaddexp.reduce(ref, axis=-1, keepdims=True)
    log_q = got - np.logaddexp.reduce(got, axis=-1, keepdims=True)
    return int((ref.argmax(-1) == got.argmax(-1)).sum()), float((np.exp(log_p) * (log_p - log_q)).sum())


def measure(shipped: Path, copy: Path, threads: int, min_top1: float, max_kl: float) -> GateFigures:
    """The gate's figures for ``copy`` against ``shipped``: agreement and KL, then, if they pass, the
    RAG-shaped probe's times (two alternating rounds each, the faster kept)."""
    reference, candidate = LlamaProbe(shipped, threads), LlamaProbe(copy, threads)
    try:
        agree = positions = 0
        kl_sum = 0.0
        for text in PROBE_TEXTS:
            tokens = reference.tokens(text)[:1024]
            if len(tokens) < 2:
                continue
            same, kl = agreement(reference.logits(tokens), candidate.logits(tokens))
            agree, kl_sum, positions = agree + same, kl_sum + kl, positions + len(tokens)
        quality = GateFigures(agree / max(positions, 1), kl_sum / max(positions, 1))
        if not quality.passes(min_top1, max_kl):
            return quality
        words = " ".join(PROBE_TEXTS)
        prompt = (reference.tokens(words) * (SPEED_PROMPT // 64 + 1))[:SPEED_PROMPT]
        shipped_s, copy_s = [], []
        for _ in range(2):
            shipped_s.append(reference.rag_call_s(prompt))
            copy_s.append(candidate.rag_call_s(prompt))
        return GateFigures(quality.top1, quality.kl, min(shipped_s), min(copy_s))
    finally:
        reference.close()
        candidate.close()


def _figures(shipped: Path, copy: Path, threads: int, min_top1: float, max_kl: float) -> GateFigures:
    """The gate's figures, measured once per CPU, thread count and bounds, and kept beside the copy."""
    cpu = detect()
    key = f"{cpu.model}|{','.join(cpu.flags)}|{threads}|{min_top1}|{max_kl}"
    kept = copy.parent / GATE
    try:
        saved = json.loads(kept.read_text())
        if saved.get("key") == key:
            return GateFigures(**saved["figures"])
    except (OSError, ValueError, TypeError, KeyError):
        pass
    figures = measure(shipped, copy, threads, min_top1, max_kl)
    try:
        kept.write_text(json.dumps({"key": key, "figures": figures.__dict__}))
    except OSError:
        log.warning("could not keep the format gate's figures in %s", kept)
    return figures


def choose(shipped: Path, allowed: list[str], threads: int, *, min_top1: float = MIN_TOP1,
           max_kl: float = MAX_KL) -> tuple[Path, PrecisionReport]:  # fmt: skip
    """The file to run and why: the first allowed format whose copy passes the gate and runs faster."""
    trials: list[Trial] = []
    for fmt in allowed:
        if fmt == AS_IS:
            break
        try:
            copy = copy_path(shipped, fmt, threads)
            figures = _figures(shipped, copy, threads, min_top1, max_kl)
        except ModelLoadFailed as exc:
            trials.append(Trial(fmt, "failed", exc.message))
            log.warning("%s: %s copy failed: %s", shipped.name, fmt, exc.message)
            continue
        detail = f"top-1 agreement {figures.top1:.4f} (min {min_top1}), KL {figures.kl:.4f} nats (max {max_kl})"
        if figures.shipped_s and figures.copy_s:
            detail += f", RAG-shaped probe {figures.shipped_s:.2f}s shipped vs {figures.copy_s:.2f}s"
        passed = figures.passes(min_top1, max_kl)
        faster = figures.speedup is not None and figures.speedup > 1.0
        outcome: Literal["chosen", "refused"] = "chosen" if passed and faster else "refused"
        why = detail if outcome == "chosen" else f"{detail}: {'not faster here' if passed else 'fails the gate'}"
        trials.append(Trial(fmt, outcome, why, top1=figures.top1, kl=figures.kl, speedup=figures.speedup))
        if outcome == "chosen":
            log.info("%s runs as %s: %s", shipped.name, fmt, why)
            return copy, PrecisionReport(fmt, tuple(allowed), f"{fmt} {why}", tuple(trials))
        log.warning("%s: %s refused: %s", shipped.name, fmt, why)
    reason = "; ".join(f"{t.precision} {t.detail}" for t in trials) or "as_is: first in the allowed list"
    return shipped, PrecisionReport(AS_IS, tuple(allowed), reason, tuple(trials))
