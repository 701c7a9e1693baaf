"""MUVERA Fixed Dimensional Encodings: one dense vector from a multivector (Dhulipala et al., 2024,
"MUVERA: Multi-Vector Retrieval via Fixed Dimensional Encodings").

For each of ``repetitions`` rounds, ``k_sim`` Gaussian hyperplanes (SimHash) split the token
space into ``2**k_sim`` buckets; each token vector goes to the bucket its sign bits name and is
projected by a random +-1 matrix to ``d_proj`` dimensions (no projection when ``d_proj`` equals the
token dimension). A query's block per bucket is the *sum* of its tokens there; a document's is the
*mean*, and an empty document bucket takes the projected token whose sign bits are nearest to the
bucket's in Hamming distance. The blocks of all rounds, concatenated, give
``repetitions * 2**k_sim * d_proj`` numbers, and ``<FDE(query), FDE(document)>`` approximates the
MaxSim (Chamfer) similarity of the two multivectors. Vectors are not normalised.

Every random matrix comes from ``seed`` (numpy's PCG64, one stream per round), so one model's
encoding is the same in every process.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True, slots=True)
class MuveraParams:
    repetitions: int
    k_sim: int
    d_proj: int
    seed: int

    @property
    def dim(self) -> int:
        return self.repetitions * (1 << self.k_sim) * self.d_proj


class Muvera:
    """The random matrices of one ``(params, token_dim)``; ``encode`` maps a multivector to its FDE."""

    def __init__(self, params: MuveraParams, token_dim: int):
        if params.d_proj > token_dim:
            raise ValueError(f"d_proj {params.d_proj} is larger than the token dimension {token_dim}")
        self.params = params
        self.token_dim = token_dim
        planes, projections = [], []
        for rep in range(params.repetitions):
            rng = np.random.default_rng([params.seed, rep])
            planes.append(rng.standard_normal((token_dim, params.k_sim)))
            if params.d_proj < token_dim:
                signs = rng.integers(0, 2, size=(token_dim, params.d_proj)) * 2 - 1
                projections.append(signs / np.sqrt(params.d_proj))
        self.planes = np.stack(planes).astype(np.float32)  # (r, d, k)
        # (r, d, d_proj); None: the identity (d_proj == token_dim)
        self.projections = np.stack(projections).astype(np.float32) if projections else None
        buckets = np.arange(1 << params.k_sim)
        self._bits = 1 << np.arange(params.k_sim)[::-1]  # sign bit j is bit (k-1-j) of the bucket id
        self._popcount = np.array([bin(int(b)).count("1") for b in buckets], dtype=np.int32)

    def encode(self, multivector: np.ndarray, *, is_query: bool) -> np.ndarray:
        """The FDE of ``(tokens, token_dim)`` vectors: float32 of ``params.dim`` numbers."""
        p = self.params
        vectors = np.asarray(multivector, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.token_dim:
            raise ValueError(f"expected (tokens, {self.token_dim}) vectors, got shape {vectors.shape}")
        n, buckets = vectors.shape[0], 1 << p.k_sim
        if n == 0:
            return np.zeros(p.dim, dtype=np.float32)
        codes = (np.matmul(vectors, self.planes) > 0) @ self._bits  # (r, n): each token's bucket per repetition
        projected = (
            np.broadcast_to(vectors, (p.repetitions, n, p.d_proj))
            if self.projections is None
            else np.matmul(vectors, self.projections)
        )  # (r, n, d_proj)
        # bucket sums: tokens sorted by (repetition, bucket), each run of one bucket added up
        flat = (codes + np.arange(p.repetitions)[:, None] * buckets).ravel()
        counts = np.bincount(flat, minlength=p.repetitions * buckets)
        filled = np.flatnonzero(counts)
        starts = (np.cumsum(counts) - counts)[filled]
        sums = np.zeros((p.repetitions * buckets, p.d_proj), dtype=np.float32)
        sums[filled] = np.add.reduceat(projected.reshape(-1, p.d_proj)[np.argsort(flat, kind="stable")], starts, axis=0)
        out = sums.reshape(p.repetitions, buckets, p.d_proj)
        if not is_query:
            counts = counts.reshape(p.repetitions, buckets)
            out /= np.maximum(counts, 1)[..., None]
            for rep in range(p.repetitions):
                empty = np.flatnonzero(counts[rep] == 0)
                if len(empty):  # each takes the token with the fewest sign bits differing from the bucket's
                    nearest = self._popcount[empty[:, None] ^ codes[rep][None, :]].argmin(axis=1)
                    out[rep, empty] = projected[rep, nearest]
        return out.reshape(-1)


@lru_cache(maxsize=64)
def muvera_for(params: MuveraParams, token_dim: int) -> Muvera:
    """One encoder per (params, token dimension), built once per process."""
    return Muvera(params, token_dim)


def fde(multivector: np.ndarray, params: MuveraParams, *, is_query: bool) -> np.ndarray:
    """The FDE of one multivector under ``params`` (query: bucket sums; document: bucket means, filled)."""
    matrix = np.asarray(multivector, dtype=np.float32)
    return muvera_for(params, int(matrix.shape[1])).encode(matrix, is_query=is_query)
