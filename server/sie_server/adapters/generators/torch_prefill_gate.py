"""Whether long prompts read by torch (torch_prefill.py) are worth it on this CPU, checked at load.

Two things must hold, measured on the model itself right after it is loaded:

- **the answer stays llama.cpp's:** for each probe text (precision.PROBE_TEXTS), llama.cpp reads it and
  decodes ``FOLLOW`` greedy tokens; torch reads it, hands the cells over, and llama.cpp decodes the same tokens.
  The next-token logits of every step (the first token and each decode step after the hand-over) agree in
  top-1 at least ``MIN_TOP1`` of the time, with a mean KL(llama.cpp || torch) of at most ``MAX_KL`` nats, the
  bounds of the weight-format gate (gguf_formats.py);
- **it is faster here:** a RAG-sized prompt (``SPEED_PROMPT`` tokens, or the profile's threshold when longer)
  read by torch takes less time than llama.cpp's own read of it (two alternating rounds, the faster kept):
  the float32 copy costs four bytes a weight, worth it only for a faster read.

When either fails, the torch reader is dropped (its memory freed) with the figures logged, and every prompt
stays on llama.cpp. The outcome is a trial in the model's precision report (``/v1/models``), chosen or refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sie_server.adapters.generators.gguf_formats import MAX_KL, MIN_TOP1, agreement
from sie_server.adapters.runtime.precision import PROBE_TEXTS, Trial

log = logging.getLogger(__name__)

FOLLOW = 8  # greedy decode steps after each probe's read
SPEED_PROMPT = 512
MAX_SPEED_PROMPT = 2048
MIN_SPEEDUP = 1.0  # torch's read must beat llama.cpp's by more than this
TRIAL = "torch_prefill"

#: (prompt, read by torch?, tokens to feed after it or None to pick them greedily) -> (the next-token logits of
#: the read and of each step after it, the tokens fed, the read's seconds)
Run = Callable[[list[int], bool, list[int] | None], tuple[np.ndarray, list[int], float]]


@dataclass(frozen=True)
class Figures:
    top1: float
    kl: float
    llama_s: float | None = None  # the timed prompt's read, once the quality bounds are met
    torch_s: float | None = None

    @property
    def speedup(self) -> float | None:
        return self.llama_s / self.torch_s if self.llama_s and self.torch_s else None

    @property
    def quality(self) -> bool:
        return self.top1 >= MIN_TOP1 and self.kl <= MAX_KL


def measure(run: Run, tokenize: Callable[[str], list[int]], threshold: int, context: int) -> tuple[Figures, int]:
    """The gate's figures (the times only when the quality bounds are met), and the length of the timed prompt."""
    agree = positions = 0
    kl_sum = 0.0
    for text in PROBE_TEXTS:
        prompt = tokenize(text)
        if not prompt:
            continue
        reference, fed, _ = run(prompt, False, None)
        candidate, _, _ = run(prompt, True, fed)
        same, kl = agreement(reference, candidate)
        agree, kl_sum, positions = agree + same, kl_sum + kl, positions + len(reference)
    length = min(max(SPEED_PROMPT, threshold), MAX_SPEED_PROMPT, context - 1)
    quality = Figures(agree / max(positions, 1), kl_sum / max(positions, 1))
    if not quality.quality:
        return quality, length
    words = tokenize(" ".join(PROBE_TEXTS))
    prompt = (words * (length // max(len(words), 1) + 1))[:length]
    llama_s, torch_s = [], []
    for _ in range(2):
        llama_s.append(run(prompt, False, [])[2])
        torch_s.append(run(prompt, True, [])[2])
    return Figures(quality.top1, quality.kl, min(llama_s), min(torch_s)), length


def decide(figures: Figures, length: int, threshold: int, model_id: str) -> Trial:
    """The trial for the report; logged, a refusal as a warning."""
    faster = figures.speedup is not None and figures.speedup > MIN_SPEEDUP
    detail = (
        f"prompts of {threshold}+ tokens read by torch in float32: top-1 agreement {figures.top1:.4f} (min "
        f"{MIN_TOP1}), KL {figures.kl:.4f} nats (max {MAX_KL}) over the probes' read and {FOLLOW} steps after"
    )
    if figures.llama_s and figures.torch_s:
        detail += f"; a {length}-token prompt {figures.torch_s:.2f}s in torch vs {figures.llama_s:.2f}s in llama.cpp"
    outcome: Literal["chosen", "refused"] = "chosen" if figures.quality and faster else "refused"
    if outcome == "refused":
        why = "fails the gate" if not figures.quality else "not faster here"
        detail += f": {why}; llama.cpp reads every prompt"
        log.warning("%s: %s", model_id, detail)
    else:
        log.info("%s: %s", model_id, detail)
    return Trial(TRIAL, outcome, detail, top1=figures.top1, kl=figures.kl, speedup=figures.speedup)


def run(probe: Run, tokenize: Callable[[str], list[int]], threshold: int, context: int, model_id: str) -> Trial:
    """Measure and decide: the trial for the model's precision report."""
    figures, length = measure(probe, tokenize, threshold, context)
    return decide(figures, length, threshold, model_id)
