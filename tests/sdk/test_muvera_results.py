"""The SDK reads an encoded item's ``muvera`` vector and late-chunking ``chunks``, from the real server.

Both clients (sync, async) and both wires (msgpack, JSON): ``muvera`` comes back as one float32 array
of the model's MUVERA dims, equal to the encoding of the multivector returned beside it (as the
server computes it); ``chunks`` as one dense vector per requested span.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import pytest
from sdk_fakes import Api

from sie_sdk import SIEAsyncClient, SIEClient
from sie_sdk.types import Item
from sie_server.catalog.schema import MuveraSpec
from sie_server.engine.muvera import MuveraParams, fde

COLBERT, EMBEDDER = "test/tiny-colbert", "test/tiny-embedder"
TEXTS = ["Invoice INV-2024-0117 from Acme Corp, total due 4,250.00 EUR", "lunch at the cafeteria"]
SPEC = MuveraSpec()  # tiny-colbert declares no muvera block: the defaults (2048 dims)
PARAMS = MuveraParams(SPEC.repetitions, SPEC.k_sim, SPEC.d_proj, SPEC.seed)


@pytest.fixture(params=["msgpack", "json"])
async def live(request: pytest.FixtureRequest, mode: str, base_url: str) -> AsyncIterator[Api]:
    wire = request.param
    api = Api(SIEClient(base_url, wire=wire) if mode == "sync" else SIEAsyncClient(base_url, wire=wire))
    yield api
    await api.close()


@pytest.mark.parametrize("is_query", [False, True])
async def test_muvera_is_read_as_a_vector_equal_to_the_fde_of_its_multivector(live: Api, is_query: bool) -> None:
    results = await live.encode(COLBERT, TEXTS, output_types=["multivector", "muvera"], is_query=is_query)
    assert len(results) == len(TEXTS)
    for result in results:
        muvera = result["muvera"]
        assert isinstance(muvera, np.ndarray) and muvera.dtype == np.float32 and muvera.shape == (SPEC.dim,)
        expected = fde(result["multivector"], PARAMS, is_query=is_query)
        np.testing.assert_allclose(muvera, expected, atol=1e-5)


async def test_muvera_alone_comes_without_the_multivector(live: Api) -> None:
    [result] = await live.encode(COLBERT, [TEXTS[0]], output_types=["muvera"])
    assert "multivector" not in result and "dense" not in result
    assert result["muvera"].shape == (SPEC.dim,) and np.isfinite(result["muvera"]).all()


async def test_chunks_are_read_one_dense_vector_per_span(live: Api) -> None:
    text = TEXTS[0]
    spans = [(0, 7), (8, 21)]
    [result] = await live.encode(EMBEDDER, [Item(text=text, spans=spans)])
    chunks = result["chunks"]
    assert [(c["start"], c["end"]) for c in chunks] == spans
    for chunk in chunks:
        assert chunk["dense"].dtype == np.float32 and chunk["dense"].shape == result["dense"].shape
        assert np.linalg.norm(chunk["dense"]) == pytest.approx(1.0, abs=1e-4)
