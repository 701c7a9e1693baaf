"""Choosing each running sequence's next token from the model's logits, all rows at once; a row
that cannot be sampled gets its own error and the others their tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

from sie_server.adapters.generator import Sampling
from sie_server.errors import InferenceError, InvalidInput, SIEError


class Row(Protocol):
    """One sequence as sampling sees it (the engine's ``Sequence``)."""

    @property
    def params(self) -> Sampling: ...

    @property
    def generator(self) -> torch.Generator | None: ...


def sample(logits: torch.Tensor, rows: Sequence[Row]) -> list[int]:
    """The next token of every row at once: argmax for greedy rows; temperature and top-p applied
    to all sampled rows together, then one draw per row (a seeded row draws from its own generator,
    so its output does not depend on what else is in the batch). Raises ValueError, before any row
    draws, when some sampled row's probabilities are not finite."""
    if logits.device.type == "cpu":  # numpy's argmax: no wake-up of torch's thread pool beside llama.cpp's
        chosen = torch.from_numpy(logits.numpy().argmax(-1))
    else:
        chosen = torch.argmax(logits, dim=-1)
    sampled = [i for i, s in enumerate(rows) if s.params.temperature > 0]
    if sampled:
        index = torch.tensor(sampled, device=logits.device)
        temperature = torch.tensor(
            [rows[i].params.temperature for i in sampled], dtype=logits.dtype, device=logits.device
        )
        probs = torch.softmax(logits[index] / temperature.unsqueeze(1), dim=-1)
        top_p = torch.tensor([rows[i].params.top_p for i in sampled], dtype=probs.dtype, device=probs.device)
        if bool((top_p < 1.0).any()):
            ordered, order = torch.sort(probs, dim=-1, descending=True)
            drop = ordered.cumsum(-1) - ordered >= top_p.unsqueeze(1)
            drop[:, 0] = False  # the nucleus holds the head even when top_p is 0 in this dtype (5e-324)
            probs = probs.scatter(-1, order, ordered.masked_fill(drop, 0.0))
        if not bool(torch.isfinite(probs).all()):
            raise ValueError("probabilities are not finite")
        free = [k for k, i in enumerate(sampled) if rows[i].generator is None]
        if free:
            chosen[index[free]] = torch.multinomial(probs[free], 1).squeeze(1)
        for k, i in enumerate(sampled):
            generator = rows[i].generator
            if generator is not None:
                chosen[i] = torch.multinomial(probs[k].cpu(), 1, generator=generator)[0]  # a CPU generator
    return [int(t) for t in chosen.tolist()]


def sample_rows(logits: torch.Tensor, rows: Sequence[Row], model_id: str) -> list[int | SIEError]:
    """``sample`` with each row's failure kept to that row: a row whose logits are not finite (NaN,
    +inf, or all -inf: the model's fault) gets INFERENCE_ERROR; a row that cannot be sampled with the
    caller's temperature and top_p gets INVALID_INPUT; every other row gets its token."""
    top = logits.amax(-1)  # NaN if any is NaN, +inf if any is, -inf only if all are: one pass
    healthy = torch.isfinite(top).tolist()
    outcomes: list[int | SIEError] = [
        InferenceError(f"model {model_id} produced non-finite scores for this sequence") for _ in rows
    ]
    good = [i for i, ok in enumerate(healthy) if ok]
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
