"""Encode options past one plain forward pass: Matryoshka dims, inputs over the model's token limit
(``truncation`` error and chunk) and late chunking (character spans to token ranges).

Chunking: the text's own tokens are cut into windows of ``width`` = limit - the special and prefix
tokens; each window is wrapped in those tokens again and encoded as an item of its own. Windows
overlap by ``width // 8`` tokens (``OVERLAP``), so a sentence cut by one window is whole in the next.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import TextLayout
from sie_server.errors import InvalidInput

OVERLAP = 8  # windows overlap by 1/OVERLAP of their width


def layout(tokens: Tokens) -> TextLayout:
    if not isinstance(tokens.data, TextLayout):
        raise TypeError("long tokens carry their TextLayout")
    return tokens.data


def windows(tokens: Tokens, limit: int) -> list[Tokens]:
    """An untruncated text as windows of at most ``limit`` tokens (one window when it fits)."""
    if tokens.length <= limit:
        return [Tokens(tokens.input_ids, tokens.token_type_ids, truncated=False)]
    place = layout(tokens)
    n = tokens.length
    own = range(place.lead, n - place.trail)
    width = limit - place.lead - place.trail
    if width < 1:
        raise InvalidInput(f"the model's limit of {limit} tokens leaves no room for text after its prefix")
    step = width - width // OVERLAP
    starts = [0]
    while starts[-1] + width < len(own):
        starts.append(starts[-1] + step)
    parts = []
    for s in starts:
        picked = [*range(place.lead), *own[s : s + width], *range(n - place.trail, n)]
        types = tokens.token_type_ids
        parts.append(
            Tokens(
                input_ids=[tokens.input_ids[k] for k in picked],
                token_type_ids=[types[k] for k in picked] if types is not None else None,
                truncated=False,
            )
        )
    return parts


def mean(vectors: Sequence[np.ndarray], normalize: bool) -> np.ndarray:
    """The mean of ``vectors``, unit length when the model normalises."""
    average = np.mean(np.stack([np.asarray(v, np.float32) for v in vectors]), axis=0)
    return unit(average) if normalize else average.astype(np.float32)


def unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    out: np.ndarray = (vector / max(norm, 1e-12)).astype(np.float32)
    return out


def matryoshka(vector: np.ndarray, dims: int, normalize: bool) -> np.ndarray:
    """The leading ``dims`` of a dense vector, renormalised when the model normalises."""
    head = np.asarray(vector, np.float32)[:dims]
    return unit(head) if normalize else head


def token_ranges(tokens: Tokens, spans: Sequence[Sequence[int]], where: str) -> list[tuple[int, int]]:
    """Each ``[start, end)`` character span as the ``(first, stop)`` range of the tokens that start in it."""
    starts = layout(tokens).starts
    ranges = []
    for k, (start, end) in enumerate(spans):
        inside = [i for i, s in enumerate(starts) if s >= 0 and start <= s < end]
        if not inside:
            raise InvalidInput(f"{where}.spans[{k}] [{start}, {end}) holds no token of the text")
        ranges.append((inside[0], inside[-1] + 1))
    return ranges


def cut(outputs: dict[str, np.ndarray], dims: int, *, normalize: bool) -> None:
    """An item's dense vector (and its span vectors) cut to ``dims`` in place."""
    if "dense" in outputs:
        outputs["dense"] = matryoshka(outputs["dense"], dims, normalize)
    if "chunks" in outputs:
        outputs["chunks"] = np.stack([matryoshka(c, dims, normalize) for c in outputs["chunks"]])
