"""Choosing each running sequence's next token from the model's logits, all rows at once; a row
that cannot be sampled gets its own error and the others their tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch

from sie_server.adapters.runtime.generator import Sampling
from sie_server.engine.grammar import Constraint, mask_logits
from sie_server.errors import InferenceError, InvalidInput, SIEError


class Row(Protocol):
    """One sequence as sampling sees it (the engine's ``Sequence``)."""

    @property
    def params(self) -> Sampling: ...

    @property
    def generator(self) -> torch.Generator | None: ...

    @property
    def constraint(self) -> Constraint | None: ...

    @property
    def generated(self) -> list[int]: ...


def _host(logits: torch.Tensor) -> np.ndarray:
    """The logits as a float32 array in host memory. Everything below is numpy on the host: on CPU a torch
    kernel over a vocabulary-wide row would start an OpenMP team on the decode thread, whose spinning
    workers then take the cores from llama.cpp's own threads during the next step."""
    if logits.device.type == "cpu" and logits.dtype == torch.float32:
        return logits.numpy()
    return logits.float().cpu().numpy()


def _uniforms(rows: list[Row]) -> np.ndarray:
    """One uniform draw in [0, 1) per row: a seeded row's from its own generator, the others' from torch's."""
    free = [k for k, row in enumerate(rows) if row.generator is None]
    draws = np.empty(len(rows), dtype=np.float64)
    if free:
        draws[free] = torch.rand(len(free), dtype=torch.float64).numpy()
    for k, row in enumerate(rows):
        if row.generator is not None:
            draws[k] = float(torch.rand((), dtype=torch.float64, generator=row.generator))
    return draws


def _nucleus(probs: np.ndarray, top_p: np.ndarray) -> np.ndarray:
    """Each row's probabilities outside its top-p nucleus set to 0 (the head always stays, even when
    top_p is 0 in this dtype: 5e-324)."""
    order = np.argsort(-probs, axis=-1, kind="stable")
    ordered = np.take_along_axis(probs, order, axis=-1)
    drop = np.cumsum(ordered, axis=-1) - ordered >= top_p[:, None]
    drop[:, 0] = False
    kept = np.empty_like(probs)
    np.put_along_axis(kept, order, np.where(drop, 0.0, ordered), axis=-1)
    return kept


def sample(logits: torch.Tensor, rows: Sequence[Row]) -> list[int]:
    """The next token of every row at once: argmax for greedy rows; temperature and top-p applied
    to all sampled rows together, then one draw per row (a seeded row draws from its own generator,
    so its output does not depend on what else is in the batch). Raises ValueError, before any row
    draws, when some sampled row's probabilities are not finite."""
    on_cpu = logits.device.type == "cpu"
    chosen = _host(logits).argmax(-1) if on_cpu else torch.argmax(logits, dim=-1).cpu().numpy()
    sampled = [i for i, s in enumerate(rows) if s.params.temperature > 0]
    if sampled:
        temperature = np.array([rows[i].params.temperature for i in sampled], dtype=np.float32)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            picked = _host(logits)[sampled] if on_cpu else _host(logits[sampled])
            scaled = picked / temperature[:, None]
            scaled = scaled - scaled.max(-1, keepdims=True)
            probs = np.exp(scaled)
            probs /= probs.sum(-1, keepdims=True)
        top_p = np.array([rows[i].params.top_p for i in sampled], dtype=np.float32)
        if bool((top_p < 1.0).any()):
            probs = _nucleus(probs, top_p)
        if not bool(np.isfinite(probs).all()):
            raise ValueError("probabilities are not finite")
        cumulative = np.cumsum(probs, axis=-1, dtype=np.float64)
        draws = _uniforms([rows[i] for i in sampled]) * cumulative[:, -1]
        for k, i in enumerate(sampled):
            chosen[i] = min(int(np.searchsorted(cumulative[k], draws[k], side="right")), probs.shape[-1] - 1)
    return [int(t) for t in chosen.tolist()]


def sample_rows(logits: torch.Tensor, rows: Sequence[Row], model_id: str) -> list[int | SIEError]:
    """``sample`` with each row's failure kept to that row: a row whose logits are not finite (NaN,
    +inf, or all -inf: the model's fault) gets INFERENCE_ERROR; a row that cannot be sampled with the
    caller's temperature and top_p gets INVALID_INPUT; every other row gets its token."""
    # NaN if any is NaN, +inf if any is, -inf only if all are: one pass (numpy on CPU, see _host)
    top = _host(logits).max(-1) if logits.device.type == "cpu" else logits.amax(-1).cpu().numpy()
    healthy = np.isfinite(top).tolist()
    outcomes: list[int | SIEError] = [
        InferenceError(f"model {model_id} produced non-finite scores for this sequence") for _ in rows
    ]
    good = [i for i, ok in enumerate(healthy) if ok]
    if any(rows[i].params.frequency_penalty or rows[i].params.presence_penalty for i in good):
        _penalize(logits, rows, good)
    if any(rows[i].constraint is not None for i in good):
        logits, failed = _constrained(logits, rows, good)
        for i, error in failed.items():
            outcomes[i] = error
        good = [i for i in good if i not in failed]
    if not good:
        return outcomes
    try:
        tokens = sample(logits if len(good) == len(rows) else logits[good], [rows[i] for i in good])
    except Exception:
        for i in good:
            outcomes[i] = _alone(logits[i : i + 1], rows[i], model_id)
    else:
        for i, token in zip(good, tokens, strict=True):
            outcomes[i] = token
    return outcomes


def _penalize(logits: torch.Tensor, rows: Sequence[Row], good: list[int]) -> None:
    """OpenAI's frequency and presence penalties, in place, on each row that asks for them: a token's logit
    less ``frequency_penalty`` for each time the row generated it so far, and ``presence_penalty`` once."""
    on_host = logits.device.type == "cpu" and logits.dtype == torch.float32
    host = _host(logits) if on_host else None  # a view of the logits, written in place
    for i in good:
        params, generated = rows[i].params, rows[i].generated
        if not generated or not (params.frequency_penalty or params.presence_penalty):
            continue
        ids, counts = np.unique(np.asarray(generated, dtype=np.int64), return_counts=True)
        inside = ids < logits.shape[-1]
        ids, counts = ids[inside], counts[inside]
        cut = (counts * params.frequency_penalty + params.presence_penalty).astype(np.float32)
        if host is not None:
            host[i, ids] -= cut
        else:
            logits[i, torch.from_numpy(ids).to(logits.device)] -= torch.from_numpy(cut).to(logits)


def _constrained(
    logits: torch.Tensor, rows: Sequence[Row], good: list[int]
) -> tuple[torch.Tensor, dict[int, SIEError]]:
    """The logits with each constrained row's disallowed tokens at -inf (free rows untouched), and the
    rows whose grammar failed or allows no token at all (each its own error)."""
    failed: dict[int, SIEError] = {}
    on_host = logits.device.type == "cpu" and logits.dtype == torch.float32
    host = _host(logits) if on_host else None  # a view of the logits, written in place
    for i in good:
        constraint = rows[i].constraint
        if constraint is None:
            continue
        try:
            allowed = constraint.allowed()
        except SIEError as exc:
            failed[i] = exc
            continue
        if not allowed.any():
            failed[i] = InferenceError("the grammar allows no next token")
            continue
        if host is not None:
            mask_logits(host[i], allowed)
        else:
            keep = torch.zeros(logits.shape[-1], dtype=torch.bool)
            keep[: min(len(allowed), logits.shape[-1])] = torch.from_numpy(allowed[: logits.shape[-1]])
            logits[i].masked_fill_(~keep.to(logits.device), float("-inf"))
    return logits, failed


def _alone(logits: torch.Tensor, row: Row, model_id: str) -> int | SIEError:
    try:
        return sample(logits, [row])[0]
    except Exception as exc:
        params = row.params
        if params.temperature > 0:
            return InvalidInput(
                f"cannot sample with temperature {params.temperature} and top_p {params.top_p}: the "
                "probabilities they give are not finite; use a larger temperature"
            )
        return InferenceError(f"model {model_id} failed choosing the next token ({type(exc).__name__})")
