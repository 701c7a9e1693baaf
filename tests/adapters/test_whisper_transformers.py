"""transformers' Whisper (family ``whisper``) on a tiny random-weight model built offline
(tests/helpers/tiny_whisper.py): the answer's shape, audio past 30 s cut into windows and stitched in the
original audio's time, a batch answering what single calls answer, the options it refuses, its memory
charge; and through the app (in process, from a catalog config), a bad clip failing alone beside a good one."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from fastapi.testclient import TestClient

from sie_server.adapters import create_adapter
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.adapters.speech.base import SAMPLE_RATE, Clip, clip_tokens
from sie_server.adapters.speech.whisper import WhisperAdapter
from sie_server.catalog.schema import ModelConfig
from sie_server.compose import create_app
from sie_server.errors import InvalidInput
from sie_server.settings import Settings
from tests.helpers.speech import tone, wav
from tests.helpers.tiny_whisper import build_whisper

MODEL_ID = "test/tiny-whisper"
GREEDY = MediaOptions.of(None, None, {"beam_size": 1})


def raw_config(folder: Path) -> dict[str, Any]:
    return {
        "id": MODEL_ID,
        "source": {"path": str(folder)},
        "adapter": "whisper",
        "architecture": {"model_type": "whisper", "hidden_size": 32},
        "tasks": {"extract": {"options": {"beam_size": 1}}},
        "max_sequence_length": 448,
        "profiles": {"cpu": {"dtype": "float32", "max_batch_tokens": 300}},
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_whisper(tmp_path_factory.mktemp("whisper"))


@pytest.fixture(scope="module")
def whisper(folder: Path) -> WhisperAdapter:
    config = ModelConfig.model_validate(raw_config(folder))
    model = create_adapter(config, config.profile("cpu"), "cpu")
    assert isinstance(model, WhisperAdapter)
    model.load(folder)
    return model


def answer(model: WhisperAdapter, clips: list[Clip], options: MediaOptions = GREEDY) -> list[dict[str, Any]]:
    model.check(options)
    found = model.run([clip_tokens(c) for c in clips], options)
    return [f.data for f in found]


def assert_well_formed(data: dict[str, Any], seconds: float) -> None:
    assert set(data) == {"text", "language", "duration_ms", "segments"}  # no words unless asked
    assert data["language"] == "en"  # an English-only model
    assert data["duration_ms"] == round(seconds * 1000)
    assert data["segments"], data  # gibberish, but timestamped gibberish
    ends = 0
    for segment in data["segments"]:
        assert ends <= segment["start_ms"] <= segment["end_ms"] <= data["duration_ms"], data["segments"]
        assert segment["text"]
        ends = segment["end_ms"]
    assert " ".join(s["text"] for s in data["segments"]).split() == data["text"].split()


@pytest.fixture(scope="module")
def singles(whisper: WhisperAdapter) -> list[dict[str, Any]]:
    """Each of ``PIECES`` transcribed alone, one call each (the reference the other tests compare with)."""
    return [answer(whisper, [Clip(piece)])[0] for piece in PIECES]


PIECES = [tone(30.0, SAMPLE_RATE, 440.0), tone(5.0, SAMPLE_RATE, 880.0), tone(2.0, SAMPLE_RATE, 1000.0)]


def test_a_clip_answers_text_language_duration_and_ordered_segments(singles: list[dict[str, Any]]) -> None:
    for data, seconds in zip(singles, (30.0, 5.0, 2.0), strict=True):
        assert_well_formed(data, seconds)
        assert data["text"] == data["text"].strip() and data["text"]


def test_audio_past_30_s_is_cut_into_windows_and_stitched_in_its_own_time(
    whisper: WhisperAdapter, singles: list[dict[str, Any]]
) -> None:
    first, last = singles[0], singles[1]
    (whole,) = answer(whisper, [Clip(np.concatenate(PIECES[:2]))])
    assert_well_formed(whole, 35.0)
    shifted = [{**s, "start_ms": s["start_ms"] + 30_000, "end_ms": s["end_ms"] + 30_000} for s in last["segments"]]
    assert whole["segments"] == first["segments"] + shifted  # each window as alone, the second moved by 30 s
    assert any(s["start_ms"] >= 30_000 for s in whole["segments"])
    assert whole["text"] == f"{first['text']} {last['text']}"


def test_a_batch_answers_what_single_calls_answer(whisper: WhisperAdapter, singles: list[dict[str, Any]]) -> None:
    batched = answer(whisper, [Clip(PIECES[2]), Clip(PIECES[1])])
    assert batched == [singles[2], singles[1]]
    assert [d["duration_ms"] for d in batched] == [2000, 5000]
    assert batched[0]["segments"] != batched[1]["segments"]  # each held to its own clip's length: nothing shared


def test_it_refuses_word_timestamps_labels_and_bad_options(whisper: WhisperAdapter) -> None:
    with pytest.raises(InvalidInput, match="word timestamps"):
        whisper.check(MediaOptions.of(None, None, {"timestamp_granularities": ["word"]}))
    with pytest.raises(InvalidInput, match="labels"):
        whisper.check(MediaOptions.of(["speech"], None, None))
    with pytest.raises(InvalidInput, match="beam_size"):
        whisper.check(MediaOptions.of(None, None, {"beam_size": 0}))


def test_its_memory_charge_is_its_weights_and_nothing_after_unload(folder: Path) -> None:
    config = ModelConfig.model_validate(raw_config(folder))
    model = create_adapter(config, config.profile("cpu"), "cpu")
    assert model.resident_bytes() == 0
    model.load(folder)
    on_disk = (folder / "model.safetensors").stat().st_size
    assert 0.97 * on_disk <= model.resident_bytes() <= on_disk  # float32 weights (tied head counted once)
    model.unload()
    assert model.resident_bytes() == 0


def test_through_the_app_a_bad_clip_fails_alone_and_the_charge_is_shown(folder: Path, tmp_path: Path) -> None:
    catalog = tmp_path / "models"
    catalog.mkdir()
    (catalog / "tiny-whisper.yaml").write_text(yaml.safe_dump(raw_config(folder)))
    good = base64.b64encode(wav(tone(3.0, 22_050), 22_050)).decode()  # resampled to 16 kHz on the way
    bad = base64.b64encode(b"RIFF not audio at all").decode()
    items = [{"id": "good", "audio": {"data": good, "format": "wav"}}, {"id": "bad", "audio": {"data": bad}}]
    with TestClient(create_app(Settings(models_dir=catalog, offline=True))) as client:
        r = client.post(f"/v1/extract/{MODEL_ID}", json={"items": items})
        assert r.status_code == 200, r.text
        good_item, bad_item = r.json()["items"]
        assert good_item["id"] == "good" and "error" not in good_item
        assert_well_formed(good_item["data"], 3.0)
        assert bad_item["id"] == "bad" and bad_item["error"]["code"] == "INVALID_INPUT"
        (model,) = client.get("/v1/models").json()["models"]
        assert model["state"] == "loaded" and model["inputs"] == ["audio"]
        on_disk = (folder / "model.safetensors").stat().st_size
        assert 0.97 * on_disk <= model["resident_bytes"] <= on_disk
