"""Encode outputs on the wire: dense vectors in the requested dtype, sparse and multivector shapes."""

from __future__ import annotations

from typing import Any

import numpy as np

from sie_server.errors import InvalidInput

DENSE_DTYPES = ("float32", "float16", "int8", "uint8", "binary", "ubinary")


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


def encode_item(item_id: str, outputs: dict[str, Any], dtype: str, dims: dict[str, int]) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": item_id}
    if "dense" in outputs:
        entry["dense"] = {
            "dims": dims.get("dense", len(outputs["dense"])),
            "dtype": dtype,
            "values": quantize(outputs["dense"], dtype),
        }
    if "sparse" in outputs:
        indices, values = outputs["sparse"]
        entry["sparse"] = {
            "dims": dims.get("sparse", 0),
            "dtype": "float32",
            "indices": np.asarray(indices, np.int32),
            "values": np.asarray(values, np.float32),
        }
    if "multivector" in outputs:
        matrix = np.asarray(outputs["multivector"], np.float32)
        values = matrix.astype(np.float16) if dtype == "float16" else matrix
        entry["multivector"] = {
            "token_dims": int(matrix.shape[1]) if matrix.ndim == 2 else 0,
            "num_tokens": int(matrix.shape[0]),
            "dtype": str(values.dtype),
            "values": values,
        }
    return entry


def check_dtype(dtype: str, output_types: list[str]) -> None:
    if dtype not in DENSE_DTYPES:
        raise InvalidInput(f"output_dtype {dtype} is not one of {', '.join(DENSE_DTYPES)}")
    if dtype not in ("float32", "float16") and output_types != ["dense"]:
        raise InvalidInput(f"output_dtype {dtype} applies to dense output only; ask for output_types ['dense']")
