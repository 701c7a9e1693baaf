"""How a bi-encoder scores a query against an item: cosine for dense vectors, MaxSim for multivectors,
dot product for sparse vectors."""

from __future__ import annotations

from typing import Any

import numpy as np


def similarity(kind: str, query: Any, item: Any) -> float:
    """Cosine for dense vectors, MaxSim for multivectors, dot product for sparse vectors."""
    if kind == "dense":
        q, d = np.asarray(query, np.float32), np.asarray(item, np.float32)
        cosine = float(q @ d / max(float(np.linalg.norm(q) * np.linalg.norm(d)), 1e-12))
        return min(1.0, max(-1.0, cosine))  # float32 rounding can land just outside [-1, 1]
    if kind == "multivector":
        return maxsim(np.asarray(query, np.float32), np.asarray(item, np.float32))
    (qi, qv), (di, dv) = query, item
    _, q_at, d_at = np.intersect1d(qi, di, assume_unique=True, return_indices=True)
    return float(np.dot(qv[q_at], dv[d_at]))


def maxsim(query: np.ndarray, document: np.ndarray) -> float:
    """Sum over query vectors of the best dot product with any document vector."""
    if len(query) == 0 or len(document) == 0:
        return 0.0
    return float((query @ document.T).max(axis=1).sum())
