"""Encode outputs as answers: dense vectors in the requested dtype, sparse and multivector shapes."""

from __future__ import annotations

from typing import Any

import numpy as np

from sie_server.catalog.schema import EncodeTask
from sie_server.contract.responses import Dense, EncodedItem, Multivector, SparseVector
from sie_server.engine.muvera import MuveraParams, fde


def quantize(vector: np.ndarray, dtype: str) -> np.ndarray:
    """float32/float16 as is; int8/uint8 by a fixed scale for unit-norm vectors (x127, clipped);
    binary/ubinary as packed sign bits (ubinary: uint8 bytes, binary: the same bytes offset to int8),
    as sentence-transformers' quantize_embeddings does."""
    v = np.asarray(vector, dtype=np.float32)
    if dtype in ("float32", "float16"):
        return v.astype(dtype, copy=False)
    if dtype == "int8":
        return np.clip(np.rint(v * 127), -127, 127).astype(np.int8)
    if dtype == "uint8":
        scaled: np.ndarray = np.clip(np.rint((v + 1) * 127.5), 0, 255)
        return scaled.astype(np.uint8)
    packed: np.ndarray = np.packbits(v > 0)
    return packed if dtype == "ubinary" else (packed.astype(np.int16) - 128).astype(np.int8)


def requested(result: dict[str, Any], output_types: list[str], task: EncodeTask, *, is_query: bool) -> dict[str, Any]:
    """The outputs a request asked for from one item's forward-pass result, with the derived ones
    (muvera: the MUVERA encoding of the multivector, as a query or as a document) computed."""
    wanted = {k: v for k, v in result.items() if k in output_types}
    spec = task.muvera_spec()
    if "muvera" in output_types and spec is not None and "multivector" in result:
        params = MuveraParams(spec.repetitions, spec.k_sim, spec.d_proj, spec.seed)
        wanted["muvera"] = fde(result["multivector"], params, is_query=is_query)
    return wanted


def encoded_item(item_id: str, outputs: dict[str, Any], dtype: str, dims: dict[str, int]) -> EncodedItem:
    """One item's answer (built without re-validation: these values come from the engine)."""
    dense = sparse = multivector = None
    if "dense" in outputs:
        values = quantize(outputs["dense"], dtype)
        dense = Dense.model_construct(dims=dims.get("dense", len(outputs["dense"])), dtype=dtype, values=values)
    if "sparse" in outputs:
        indices, weights = outputs["sparse"]
        sparse = SparseVector.model_construct(
            dims=dims.get("sparse", 0),
            dtype="float32",
            indices=np.asarray(indices, np.int32),
            values=np.asarray(weights, np.float32),
        )
    if "multivector" in outputs:
        matrix = np.asarray(outputs["multivector"], np.float32)
        rows = matrix.astype(np.float16) if dtype == "float16" else matrix
        multivector = Multivector.model_construct(
            token_dims=int(matrix.shape[1]) if matrix.ndim == 2 else 0,
            num_tokens=int(matrix.shape[0]),
            dtype=str(rows.dtype),
            values=rows,
        )
    muvera = None
    if "muvera" in outputs:
        vector = quantize(outputs["muvera"], dtype)
        muvera = Dense.model_construct(dims=dims.get("muvera", len(vector)), dtype=dtype, values=vector)
    return EncodedItem.model_construct(id=item_id, dense=dense, sparse=sparse, multivector=multivector, muvera=muvera)
