"""MUVERA Fixed Dimensional Encodings: sizes, reproducibility, the bucket sums and means, and that the
dot product of a query's and a document's encodings ranks documents as MaxSim does."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sie_server.catalog.schema import EncodeTask, MuveraSpec
from sie_server.engine.muvera import Muvera, MuveraParams, fde
from sie_server.engine.similarity import maxsim
from tests.helpers.server import pythonpath

DEFAULT = MuveraParams(repetitions=16, k_sim=4, d_proj=8, seed=42)


def unit(x: np.ndarray) -> np.ndarray:
    return np.asarray(x / np.linalg.norm(x, axis=-1, keepdims=True), dtype=np.float32)


def test_dimension_is_repetitions_times_buckets_times_projection() -> None:
    tokens = unit(np.random.default_rng(0).standard_normal((7, 32)))
    assert fde(tokens, DEFAULT, is_query=True).shape == (16 * 16 * 8,)
    small = MuveraParams(repetitions=3, k_sim=2, d_proj=32, seed=1)  # d_proj == token dim: no projection
    assert fde(tokens, small, is_query=False).shape == (3 * 4 * 32,)
    assert MuveraSpec().dim == 2048
    assert EncodeTask.model_validate({"multivector": {"dim": 128}}).dims() == {"multivector": 128, "muvera": 2048}


def test_same_seed_gives_the_same_encoding_in_another_instance_and_process() -> None:
    tokens = unit(np.random.default_rng(1).standard_normal((5, 16)))
    first = Muvera(DEFAULT, 16).encode(tokens, is_query=False)
    np.testing.assert_array_equal(first, Muvera(DEFAULT, 16).encode(tokens, is_query=False))
    other_seed = Muvera(MuveraParams(16, 4, 8, seed=43), 16).encode(tokens, is_query=False)
    assert not np.allclose(first, other_seed)
    script = (
        "import sys, numpy as np\n"
        "from sie_server.engine.muvera import MuveraParams, fde\n"
        "tokens = np.frombuffer(sys.stdin.buffer.read(), dtype=np.float32).reshape(5, 16)\n"
        "sys.stdout.buffer.write(fde(tokens, MuveraParams(16, 4, 8, 42), is_query=False).tobytes())\n"
    )
    env = {"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], input=tokens.tobytes(), capture_output=True, env=env, timeout=60, check=True
    )
    # the same projections; the sums may come out an ulp apart: the other process picks its own BLAS kernel
    # (here OPENBLAS_CORETYPE is not passed on, so it runs the CPU's own instead of the Haswell one)
    np.testing.assert_allclose(np.frombuffer(done.stdout, dtype=np.float32), first, rtol=1e-5, atol=1e-6)


def _with_codes(encoder: Muvera, wanted: list[int], dim: int) -> np.ndarray:
    """Unit vectors whose SimHash bucket in repetition 0 is each of ``wanted``, in order."""
    rng = np.random.default_rng(5)
    planes = encoder.planes[0]
    found: list[np.ndarray] = []
    for code in wanted:
        while True:
            v = unit(rng.standard_normal(dim))
            bits = (v @ planes > 0).astype(int)
            if int("".join(map(str, bits)), 2) == code:
                found.append(v)
                break
    return np.stack(found)


def test_queries_sum_and_documents_average_each_bucket_and_fill_empty_ones_from_the_nearest_code() -> None:
    params = MuveraParams(repetitions=1, k_sim=2, d_proj=4, seed=9)  # d_proj == dim: the blocks are the vectors
    encoder = Muvera(params, 4)
    a, b, c = _with_codes(encoder, [0b01, 0b01, 0b11], 4)
    tokens = np.stack([a, b, c])
    query = encoder.encode(tokens, is_query=True).reshape(4, 4)
    np.testing.assert_allclose(query[0b01], a + b, atol=1e-6)
    np.testing.assert_allclose(query[0b11], c, atol=1e-6)
    np.testing.assert_array_equal(query[[0b00, 0b10]], 0)  # a query's empty buckets stay empty
    doc = encoder.encode(tokens, is_query=False).reshape(4, 4)
    np.testing.assert_allclose(doc[0b01], (a + b) / 2, atol=1e-6)
    np.testing.assert_allclose(doc[0b11], c, atol=1e-6)
    np.testing.assert_allclose(doc[0b00], a, atol=1e-6)  # 00 is one bit from 01 (a, b), two from 11
    np.testing.assert_allclose(doc[0b10], c, atol=1e-6)  # 10 is one bit from 11, two from 01


def test_projection_and_sizes_are_checked() -> None:
    with pytest.raises(ValueError, match="d_proj 8 is larger"):
        Muvera(DEFAULT, 4)
    with pytest.raises(ValueError, match="expected"):
        Muvera(DEFAULT, 16).encode(np.zeros((3, 8), np.float32), is_query=True)
    assert not Muvera(DEFAULT, 16).encode(np.zeros((0, 16), np.float32), is_query=False).any()


def test_fde_dot_product_finds_the_maxsim_best_document_for_most_queries() -> None:
    """Documents mix a few of 40 topics; a query is about two. With the default size (2048), the
    document MaxSim ranks first is in the FDE's top 5 of 50 for at least 80% of 30 queries (a
    random ranking would manage 10%)."""
    rng = np.random.default_rng(0)
    dim, hits, queries = 64, 0, 30
    for _ in range(queries):
        topics = unit(rng.standard_normal((40, dim)))
        docs = [
            unit(topics[rng.choice(rng.choice(40, 4, replace=False), 30)] + 0.1 * rng.standard_normal((30, dim)))
            for _ in range(50)
        ]
        query = unit(topics[rng.choice(rng.choice(40, 2, replace=False), 8)] + 0.1 * rng.standard_normal((8, dim)))
        best = int(np.argmax([maxsim(query, d) for d in docs]))
        q = fde(query, DEFAULT, is_query=True)
        approx = np.array([q @ fde(d, DEFAULT, is_query=False) for d in docs])
        hits += int((approx > approx[best]).sum()) < 5
    assert hits >= 0.8 * queries, f"{hits}/{queries}"


def test_config_refuses_muvera_without_a_multivector_or_a_projection_wider_than_it() -> None:
    with pytest.raises(ValueError, match=r"declare tasks\.encode\.multivector"):
        EncodeTask.model_validate({"dense": {"dim": 8}, "muvera": {}})
    with pytest.raises(ValueError, match="exceeds the multivector dim"):
        EncodeTask.model_validate({"multivector": {"dim": 4}, "muvera": {"d_proj": 8}})
    task = EncodeTask.model_validate({"multivector": {"dim": 16}, "muvera": {"repetitions": 2, "k_sim": 3}})
    assert task.dims()["muvera"] == 2 * 8 * 8
    assert EncodeTask.model_validate({"dense": {"dim": 8}}).served_outputs() == ["dense"]
