"""Each family in its GPU precision against the same weights in float32, on one device: the server's own adapter
loaded twice (its cuda profile as written, then the same profile in float32), the same inputs through both, the
outputs compared with a tolerance stated per family. Also checks that the low-precision copy really holds half the
bytes (a profile's dtype that the adapter ignores would pass every comparison)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._gpu_models import Spec
from benchmarks.corpus import build_corpus

#: the lowest cosine between an embedding in the GPU precision and in float32
COSINE_FLOOR = 0.999
#: ||low - fp32|| / ||fp32|| of a cross-encoder's scores (float16 operands land between 1e-3 and 1e-2)
SCORE_REL_TOL = 2e-2
#: the largest difference of one span's probability (GLiNER, every span and label, no threshold)
SPAN_PROB_TOL = 2e-2
#: ||low - fp32|| / ||fp32|| of the next-token logits after a prompt (bfloat16 through every layer)
LOGITS_REL_TOL = 5e-2
#: the low-precision copy's bytes over the float32 copy's, at most (float16/bfloat16 halve every weight)
HALF_BYTES_RATIO = 0.55
LABELS = ("person", "company", "place")
PROMPTS = ["The invoice from Acme Corp is due on Friday.", "Write a short note about GPUs.", "hello world"]


@dataclass
class Outcome:
    ok: bool
    detail: str
    figure: float


def relative_error(low: np.ndarray, ref: np.ndarray) -> float:
    low, ref = np.asarray(low, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(low)):
        return float("inf")
    return float(np.linalg.norm(low - ref) / max(np.linalg.norm(ref), 1e-30))


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 2 or len(x) == 0:
        raise ValueError(f"shapes differ or are empty: {x.shape} vs {y.shape}")
    if not np.all(np.isfinite(x)):
        return float("-inf")
    norms = np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1)
    return float(np.min(np.sum(x * y, axis=1) / np.maximum(norms, 1e-30)))


def _adapter(config: Any, profile: Any, device: str) -> Any:
    from sie_server.adapters import create_adapter

    adapter = create_adapter(config, profile, device)
    adapter.load(Path(config.source.path))
    return adapter


def _free(device: str, *adapters: Any) -> None:
    for adapter in adapters:
        adapter.unload()
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def embed(adapter: Any, texts: list[str]) -> np.ndarray:
    from sie_server.adapters.runtime.options import EncodeOptions

    out = adapter.run(adapter.tokenize_texts(texts), EncodeOptions())
    return np.stack([o["dense"] for o in out])


def _embedder(low: Any, ref: Any, texts: list[str]) -> tuple[float, str, bool]:
    worst = min_cosine(embed(low, texts), embed(ref, texts))
    return worst, f"min cosine {worst:.5f} over {len(texts)} texts (floor {COSINE_FLOOR})", worst >= COSINE_FLOOR


def _reranker(low: Any, ref: Any, texts: list[str]) -> tuple[float, str, bool]:
    from sie_server.adapters.runtime.options import ScoreOptions

    def scores(adapter: Any) -> np.ndarray:
        return np.asarray(adapter.run(adapter.tokenize_pairs(texts[0], texts[1:]), ScoreOptions()))

    error = relative_error(scores(low), scores(ref))
    return (
        error,
        f"scores' relative error {error:.2e} over {len(texts) - 1} pairs (at most {SCORE_REL_TOL})",
        (error <= SCORE_REL_TOL),
    )


def _extractor(low: Any, ref: Any, texts: list[str]) -> tuple[float, str, bool]:
    """Every span's probability for every label, read off the span model's logits as the adapter's GLiNER
    computes them (a forward hook: which spans pass a threshold is a discrete choice that near ties flip)."""
    import torch

    def probabilities(adapter: Any) -> np.ndarray:
        caught: list[Any] = []
        module = adapter.model.model
        hook = module.register_forward_hook(lambda _m, _i, out: caught.append(getattr(out, "logits", out)))
        try:
            # a threshold almost no span passes: decoding (Python, per span) stays short; the logits are the same
            adapter.model.inference(texts, list(LABELS), threshold=0.999, batch_size=len(texts))
        finally:
            hook.remove()
        logits = caught[-1] if not isinstance(caught[-1], tuple | list) else caught[-1][0]
        return torch.sigmoid(logits.float()).cpu().numpy()

    ours, theirs = probabilities(low), probabilities(ref)
    if ours.shape != theirs.shape:
        return float("inf"), f"span logits {ours.shape} in low precision, {theirs.shape} in float32", False
    finite = np.isfinite(theirs)
    if not np.all(np.isfinite(ours[finite])):
        return float("inf"), "non-finite span probabilities in low precision", False
    worst = float(np.max(np.abs(ours[finite] - theirs[finite])))
    detail = f"largest span probability difference {worst:.2e} over {int(finite.sum())} (at most {SPAN_PROB_TOL})"
    return worst, detail, worst <= SPAN_PROB_TOL


def _generator(low: Any, ref: Any, texts: list[str]) -> tuple[float, str, bool]:
    import torch

    def logits(adapter: Any, prompt: str) -> np.ndarray:
        ids = adapter.tokenizer(prompt, return_tensors="pt")["input_ids"].to(adapter.device)
        with torch.inference_mode():
            return adapter.model(input_ids=ids).logits[0, -1].float().cpu().numpy()

    errors, agree = [], 0
    for prompt in PROMPTS:
        ours, theirs = logits(low, prompt), logits(ref, prompt)
        errors.append(relative_error(ours, theirs))
        agree += int(np.argmax(ours) == np.argmax(theirs))
    worst = max(errors)
    detail = (
        f"next-token logits' relative error at most {worst:.2e} over {len(PROMPTS)} prompts (at most "
        f"{LOGITS_REL_TOL}); same top-1 token {agree}/{len(PROMPTS)} (random weights: near ties)"
    )
    return worst, detail, worst <= LOGITS_REL_TOL


def reference_vectors(config: Any, device: str, texts: list[str]) -> np.ndarray:
    """The embedder's vectors in float32 through the server's own adapter (what the served ones are checked against)."""
    adapter = _adapter(config, config.profile("cuda").model_copy(update={"dtype": "float32"}), device)
    try:
        return embed(adapter, texts)
    finally:
        _free(device, adapter)


COMPARE: dict[str, Callable[[Any, Any, list[str]], tuple[float, str, bool]]] = {
    "embedder": _embedder,
    "reranker": _reranker,
    "extractor": _extractor,
    "generator": _generator,
}


def compare(spec: Spec, config: Any, device: str, profile_kind: str = "cuda") -> Outcome:
    """The family's outputs in the ``profile_kind`` profile's dtype against float32, both on ``device``."""
    profile = config.profile(profile_kind)
    texts = build_corpus(24, seed=7)
    low = _adapter(config, profile, device)
    try:
        ref = _adapter(config, profile.model_copy(update={"dtype": "float32"}), device)
        try:
            figure, detail, ok = COMPARE[spec.family](low, ref, texts)
            ratio = low.resident_bytes() / max(ref.resident_bytes(), 1)
        finally:
            _free(device, ref)
    finally:
        _free(device, low)
    halved = profile.dtype == "float32" or ratio <= HALF_BYTES_RATIO
    detail += f"; {profile.dtype} copy holds {ratio:.2f}x the float32 bytes"
    if not halved:
        detail += f" (more than {HALF_BYTES_RATIO}: the profile's dtype is not what runs)"
    return Outcome(ok and halved, detail, figure)
