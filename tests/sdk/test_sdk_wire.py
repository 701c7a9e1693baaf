"""The body codecs: msgpack-numpy arrays in and out, never anything but plain numbers."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgpack
import numpy as np
import pytest
from sdk_fakes import nd

from sie_sdk import ProtocolError
from sie_sdk._wire import decode_body, encode_body

MSGPACK = "application/msgpack"


def packed(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


@pytest.mark.parametrize("dtype", ["<f4", "<f2", "<i1", "|u1", "<i4", "<i8", "<f8"])
def test_msgpack_numpy_arrays_decode(dtype: str) -> None:
    array = (np.arange(12) - 3).astype(dtype).reshape(3, 4)
    decoded = decode_body(packed({"values": nd(array)}), MSGPACK)
    out = decoded["values"]
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.dtype(dtype) and out.shape == (3, 4)
    np.testing.assert_array_equal(out, array)
    assert out.flags.writeable


def test_big_endian_arrays_decode_to_native_order() -> None:
    array = np.array([1.5, -2.0], dtype=">f4")
    raw = {b"nd": True, b"type": ">f4", b"kind": b"", b"shape": [2], b"data": array.tobytes()}
    out = decode_body(packed(raw), MSGPACK)
    assert out.dtype.isnative
    np.testing.assert_array_equal(out, [1.5, -2.0])


def test_str_keyed_array_maps_decode_too() -> None:
    array = np.ones(3, dtype="<f4")
    raw = {"nd": True, "type": "<f4", "kind": "", "shape": [3], "data": array.tobytes()}
    np.testing.assert_array_equal(decode_body(packed(raw), MSGPACK), array)


def test_other_maps_get_str_keys() -> None:
    decoded = decode_body(packed({b"model": "m", "items": [{b"id": "a", "meta": {b"nd": "no"}}]}), MSGPACK)
    assert decoded == {"model": "m", "items": [{"id": "a", "meta": {"nd": "no"}}]}


@pytest.mark.parametrize(
    "bad",
    [
        {b"kind": b"O", b"type": "|O"},  # a pickled object array: never unpickled
        {b"type": "|O"},
        {b"type": "<U3"},
        {b"type": "|S4"},
        {b"type": "|V8"},
        {b"type": "[('a', '<f4')]"},
        {b"type": "not-a-dtype"},
        {b"shape": [5]},  # payload too short for the shape
        {b"shape": [-1]},
        {b"data": "text"},
    ],
)
def test_refuses_anything_but_plain_numeric_arrays(bad: dict[bytes, Any]) -> None:
    raw = {b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [2], b"data": b"\x00" * 8, **bad}
    with pytest.raises(ProtocolError):
        decode_body(packed(raw), MSGPACK)


def test_arrays_round_trip_through_msgpack() -> None:
    array = np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)
    raw = msgpack.unpackb(encode_body({"q": array, "s": np.float32(0.5)}, "msgpack"), raw=False)
    assert raw["q"] == {b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [2, 3], b"data": array.tobytes()}
    assert raw["s"] == 0.5
    np.testing.assert_array_equal(decode_body(encode_body({"q": array}, "msgpack"), MSGPACK)["q"], array)


def test_big_endian_arrays_are_sent_little_endian() -> None:
    raw = msgpack.unpackb(encode_body(np.array([1.0], dtype=">f4"), "msgpack"), raw=False)
    assert raw[b"type"] == "<f4"
    assert raw[b"data"] == np.array([1.0], dtype="<f4").tobytes()


def test_non_numeric_arrays_are_not_sent() -> None:
    with pytest.raises(TypeError):
        encode_body({"a": np.array(["x"], dtype=object)}, "msgpack")
    with pytest.raises(TypeError):
        encode_body({"a": np.array(["x"], dtype=object)}, "json")


def test_json_bodies_use_lists_and_base64() -> None:
    body = json.loads(encode_body({"v": np.arange(3, dtype=np.int8), "img": b"\x00\xff"}, "json"))
    assert body == {"v": [0, 1, 2], "img": base64.b64encode(b"\x00\xff").decode()}


def test_decode_picks_the_codec_from_content_type() -> None:
    assert decode_body(b'{"a": 1}', "application/json") == {"a": 1}
    assert decode_body(packed({"a": 1}), "application/msgpack; charset=binary") == {"a": 1}
    assert decode_body(b"", MSGPACK) is None
    with pytest.raises(ProtocolError):
        decode_body(b"{not json", "application/json")


def test_maxsim_helper_matches_the_definition() -> None:
    import numpy as np
    import pytest

    from sie_sdk import maxsim

    q = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    d = np.array([[0.6, 0.8], [1.0, 0.0], [0.0, -1.0]], dtype=np.float32)
    assert maxsim(q, d) == pytest.approx(1.0 + 0.8)
    assert maxsim(q[:0], d) == 0.0
    with pytest.raises(ValueError, match="dim"):
        maxsim(q, d[:, :1])
