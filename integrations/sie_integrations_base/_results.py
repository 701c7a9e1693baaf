"""SDK answers as the plain values adapters hand on: float lists and arrays, sparse dicts, ranked orders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt

from sie_sdk.types import EncodeResult


class SparseDict(TypedDict):
    """A sparse vector as plain lists: token ids and their weights."""

    indices: list[int]
    values: list[float]


def as_floats(vector: Any) -> list[float]:
    """One vector as a flat list of Python floats."""
    return [float(x) for x in np.asarray(vector, dtype=np.float64).reshape(-1)]


def as_float32(vector: Any) -> npt.NDArray[np.float32]:
    """One vector (or a multivector's matrix) as a float32 array, its shape kept."""
    return np.asarray(vector, dtype=np.float32)


def sparse_dict(result: EncodeResult) -> SparseDict:
    sparse = result["sparse"]
    return {
        "indices": [int(i) for i in np.asarray(sparse["indices"]).reshape(-1)],
        "values": as_floats(sparse["values"]),
    }


def multivector_lists(result: EncodeResult) -> list[list[float]]:
    matrix = np.asarray(result["multivector"], dtype=np.float64)
    return [[float(x) for x in row] for row in matrix.reshape(matrix.shape[0], -1)]


def check_top_k(top_k: int | None, name: str = "top_k") -> None:
    """Refuse a result limit below 1 (``None``: no limit)."""
    if top_k is not None and top_k < 1:
        raise ValueError(f"{name} must be at least 1, not {top_k}")


def rank_order(scores: Sequence[float], top_k: int | None = None) -> list[int]:
    """Positions in ``scores``, best first (ties keep input order), at most ``top_k``."""
    order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)
    return order if top_k is None else order[:top_k]
