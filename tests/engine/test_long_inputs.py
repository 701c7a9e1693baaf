"""Windows for ``truncation: chunk``, span-to-token ranges for late chunking, Matryoshka cuts."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import TextLayout
from sie_server.engine.long_inputs import OVERLAP, matryoshka, token_ranges, windows
from sie_server.errors import InvalidInput

CLS, PREFIX, SEP = 101, 7, 102


def text_tokens(n: int) -> Tokens:
    """[CLS], one prefix token, ``n`` text tokens (ids 1000+i, one character each, a space apart), [SEP]."""
    ids = [CLS, PREFIX, *range(1000, 1000 + n), SEP]
    starts = [-1, -1, *range(0, 2 * n, 2), -1]
    return Tokens(ids, [0] * len(ids), truncated=False, data=TextLayout(lead=2, trail=1, starts=starts))


def test_a_text_that_fits_is_one_window_as_it_is() -> None:
    tokens = text_tokens(5)
    [only] = windows(tokens, limit=8)
    assert only.input_ids == tokens.input_ids and not only.truncated


def test_windows_keep_the_lead_and_trail_and_overlap_by_an_eighth() -> None:
    limit, n = 19, 50  # width 16, overlap 2, step 14
    parts = windows(text_tokens(n), limit)
    width = limit - 3
    own = [p.input_ids[2:-1] for p in parts]
    assert all(p.input_ids[:2] == [CLS, PREFIX] and p.input_ids[-1] == SEP for p in parts)
    assert all(p.length <= limit and p.token_type_ids == [0] * p.length for p in parts)
    assert [w[0] - 1000 for w in own] == [0, 14, 28, 42]
    for a, b in pairwise(own):
        assert a[-(width // OVERLAP) :] == b[: width // OVERLAP]  # the overlap
    assert sorted(set(i for w in own for i in w)) == list(range(1000, 1000 + n))  # every token, in order


def test_no_room_for_text_is_refused() -> None:
    with pytest.raises(InvalidInput, match="no room"):
        windows(text_tokens(10), limit=3)


def test_spans_take_the_tokens_that_start_inside_them() -> None:
    tokens = text_tokens(6)  # text tokens start at characters 0, 2, 4, ...
    assert token_ranges(tokens, [[0, 4], [4, 11], [3, 5]], "items[0]") == [(2, 4), (4, 8), (4, 5)]
    with pytest.raises(InvalidInput, match=r"items\[0\]\.spans\[0\]"):
        token_ranges(tokens, [[1, 2]], "items[0]")  # character 1 is a space


def test_matryoshka_renormalises_only_normalised_models() -> None:
    v = np.array([3.0, 4.0, 12.0], np.float32)
    np.testing.assert_allclose(matryoshka(v, 2, normalize=True), [0.6, 0.8])
    np.testing.assert_allclose(matryoshka(v, 2, normalize=False), [3.0, 4.0])
