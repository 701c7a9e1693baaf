"""Client-side scoring helpers for vectors the server returned."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike


def maxsim(query: ArrayLike, document: ArrayLike) -> float:
    """ColBERT late interaction: the sum over query token vectors of their best dot product with
    any document token vector. Both are ``(tokens, dim)`` arrays, as ``encode(...,
    output_types=["multivector"])`` returns them (already L2-normalised)."""
    q: np.ndarray[Any, Any] = np.asarray(query, dtype=np.float32)
    d: np.ndarray[Any, Any] = np.asarray(document, dtype=np.float32)
    if q.ndim != 2 or d.ndim != 2 or q.shape[1] != d.shape[1]:
        raise ValueError(f"maxsim needs two (tokens, dim) arrays of one dim, got {q.shape} and {d.shape}")
    if len(q) == 0 or len(d) == 0:
        return 0.0
    return float((q @ d.T).max(axis=1).sum())
