"""Entity extraction over HTTP with a tiny random GLiNER: offsets, windows, thresholds and errors."""

from __future__ import annotations

import httpx
import pytest

from sie_server.adapters.extractors.gliner import Window, merge_windows
from sie_server.adapters.runtime.options import Span

GLINER = "test/tiny-gliner"
TEXT = "Invoice INV-2024-0117 from Acme Corp: total due 4,250.00 EUR by 31 March 2024."


def extract(base_url: str, body: dict[str, object]) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/extract/{GLINER}", json=body, timeout=120)


def test_spans_are_character_offsets_into_the_text(base_url: str) -> None:
    body = {"items": [{"id": "inv", "text": TEXT}], "params": {"labels": ["company", "amount"], "threshold": 0.0}}
    r = extract(base_url, body)
    assert r.status_code == 200, r.text
    item = r.json()["items"][0]
    assert item["id"] == "inv" and item["entities"]
    for entity in item["entities"]:
        assert TEXT[entity["start"] : entity["end"]] == entity["text"]
        assert entity["label"] in ("company", "amount") and entity["bbox"] is None
        assert 0.0 <= entity["score"] <= 1.0


def test_threshold_filters(base_url: str) -> None:
    low = extract(base_url, {"items": [{"text": TEXT}], "params": {"labels": ["company"], "threshold": 0.0}})
    high = extract(base_url, {"items": [{"text": TEXT}], "params": {"labels": ["company"], "threshold": 0.99}})
    assert len(high.json()["items"][0]["entities"]) < len(low.json()["items"][0]["entities"])


def test_long_text_is_windowed_and_offsets_map_back(base_url: str) -> None:
    long_text = " ".join(f"word{i} Acme" for i in range(150))  # 300 words; the tiny model reads 64 at a time
    r = extract(base_url, {"items": [{"text": long_text}], "params": {"labels": ["company"], "threshold": 0.0}})
    entities = r.json()["items"][0]["entities"]
    assert max(e["end"] for e in entities) > len(long_text) // 2  # spans found in later windows
    for entity in entities:
        assert long_text[entity["start"] : entity["end"]] == entity["text"]
    keys = [(e["start"], e["end"], e["label"]) for e in entities]
    assert len(keys) == len(set(keys))  # overlapping windows do not duplicate spans


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        (None, "params.labels is required"),
        ({"threshold": 0.5}, "params.labels is required"),
        ({"labels": []}, "at least one entity type"),
        ({"labels": ["a", "b", "c", "d", "e", "f"]}, "takes at most 5"),
        ({"labels": ["company", " "]}, "non-empty string"),
        ({"labels": ["company"], "threshold": 2}, "params.threshold"),
    ],
)
def test_extract_errors(base_url: str, params: object, fragment: str) -> None:
    body: dict[str, object] = {"items": [{"text": TEXT}]}
    if params is not None:
        body["params"] = params
    r = extract(base_url, body)
    assert r.status_code == 400 and r.headers["x-sie-error-code"] == "INVALID_INPUT"
    assert fragment in r.json()["detail"]["message"]


def test_text_without_characters(base_url: str) -> None:
    r = extract(base_url, {"items": [{"text": "   "}], "params": {"labels": ["company"]}})
    assert r.status_code == 400 and "no characters" in r.json()["detail"]["message"]


def test_window_spans_merge_back_onto_their_texts() -> None:
    """GLiNER's own merge: window offsets become text offsets, a span two overlapping windows both
    found is kept once with its better score, and each text gets only its own windows' spans."""
    text = "Acme Corp paid Beta Ltd"
    windows = [Window(0, 0, "Acme Corp paid"), Window(0, 5, "Corp paid Beta Ltd"), Window(1, 0, "Beta Ltd")]
    found: list[list[Span]] = [
        [Span(text="Acme Corp", label="company", score=0.6, start=0, end=9)],
        [
            Span(text="Corp", label="company", score=0.9, start=0, end=4),  # the same span as text[5:9]...
            Span(text="Beta Ltd", label="company", score=0.7, start=10, end=18),
        ],
        [Span(text="Beta Ltd", label="company", score=0.8, start=0, end=8)],
    ]
    found[0].append(Span(text="Corp", label="company", score=0.4, start=5, end=9))  # ...found again, worse
    first, second = merge_windows(2, windows, found)
    assert [(e["start"], e["end"], e["score"]) for e in first] == [(0, 9, 0.6), (5, 9, 0.9), (15, 23, 0.7)]
    for entity in first:
        assert text[entity["start"] : entity["end"]] == entity["text"] and entity["bbox"] is None
    assert [(e["text"], e["start"], e["end"]) for e in second] == [("Beta Ltd", 0, 8)]
