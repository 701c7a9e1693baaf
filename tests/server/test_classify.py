"""Text classification on the shared server (and through the gateway): extract answers
``classifications`` best first, per-item errors, bad inputs as 400s naming the field; OpenAI's
``/v1/moderations`` through the official client and vLLM's ``/v1/classify``; the published sie-sdk."""

from __future__ import annotations

import json
import math
import subprocess
from typing import Any

import httpx
import openai
import pytest

from tests.helpers.catalog import MODERATION, REPO, TINY_GLICLASS, TINY_NLI, TINY_SENTIMENT, TOXIC_LABELS
from tests.helpers.metrics import find

pytestmark = pytest.mark.allow_hosts(["127.0.0.1", "::1"])

LABELS = ["billing", "support", "sports", "weather"]
TEXT = "the invoice total is due"
COMPAT_PYTHON = REPO / ".venv-compat" / "bin" / "python"


def extract(base_url: str, model: str, body: object) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/extract/{model}", json=body, timeout=120)


def answer(base_url: str, model: str, body: object) -> list[dict[str, Any]]:
    r = extract(base_url, model, body)
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def test_zero_shot_labels_come_back_best_first_as_a_softmax(base_url: str) -> None:
    [item] = answer(base_url, TINY_NLI, {"items": [{"id": "a", "text": TEXT}], "params": {"labels": LABELS}})
    found = item["classifications"]
    assert isinstance(found, list) and {c["label"] for c in found} == set(LABELS)
    scores = [c["score"] for c in found]
    assert scores == sorted(scores, reverse=True) and math.isclose(sum(scores), 1.0, abs_tol=1e-5)
    assert item["entities"] == [] and item["objects"] == [] and "error" not in item
    data = item["data"]
    assert isinstance(data, dict) and list(data["scores"]) == LABELS  # every label in the request's order


def test_template_and_multi_label_change_the_scores(base_url: str) -> None:
    def scores(options: dict[str, object]) -> dict[str, float]:
        body = {"items": [{"text": TEXT}], "params": {"labels": LABELS, "options": options}}
        [item] = answer(base_url, TINY_NLI, body)
        return {c["label"]: c["score"] for c in item["classifications"]}

    plain = scores({})
    assert plain != scores({"hypothesis_template": "a b c {} d e"})
    multi = scores({"multi_label": True})
    assert not math.isclose(sum(multi.values()), 1.0, abs_tol=1e-3)


def test_twenty_labels_are_one_batch(base_url: str) -> None:
    def batches() -> tuple[float, float]:
        text = httpx.get(f"{base_url}/metrics", timeout=30).text
        from prometheus_client.parser import text_string_to_metric_families

        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
        labels = {"model": TINY_NLI}
        return (
            find(samples, "sie_batch_items_count", labels, absent_as_zero=True),
            find(samples, "sie_batch_items_sum", labels, absent_as_zero=True),
        )

    before = batches()
    labels = [f"topic {k}" for k in range(20)]
    [item] = answer(base_url, TINY_NLI, {"items": [{"text": TEXT}], "params": {"labels": labels}})
    assert len(item["classifications"]) == 20
    after = batches()
    assert after[0] - before[0] == 1 and after[1] - before[1] == 20  # one forward pass over 20 rows


def test_an_empty_text_fails_alone_and_its_neighbours_are_answered(base_url: str) -> None:
    body = {
        "items": [{"id": "a", "text": TEXT}, {"id": "empty", "text": "  "}, {"id": "b", "text": "hello world"}],
        "params": {"labels": LABELS},
    }
    a, empty, b = answer(base_url, TINY_NLI, body)
    assert [a["id"], empty["id"], b["id"]] == ["a", "empty", "b"]
    assert empty["error"] == {
        "code": "INVALID_INPUT",
        "message": "items[1].text is empty: there is nothing to classify",
    }
    assert empty["classifications"] == []
    for item in (a, b):
        assert "error" not in item and len(item["classifications"]) == len(LABELS)


@pytest.mark.parametrize(
    ("model", "params", "fragment"),
    [
        (TINY_NLI, {}, "params.labels must name at least one label"),
        (TINY_NLI, {"labels": []}, "params.labels must name at least one label"),
        (TINY_NLI, {"labels": [f"l{k}" for k in range(1001)]}, "params.labels: 1001 labels"),
        (TINY_NLI, {"labels": LABELS, "options": {"hypothesis_template": "no slot"}}, "hypothesis_template"),
        (TINY_NLI, {"labels": LABELS, "options": {"colour": 1}}, "params.options ['colour']"),
        (TINY_GLICLASS, {"labels": LABELS, "options": {"classification_type": "x"}}, "classification_type"),
        (TINY_SENTIMENT, {"labels": ["toxic"]}, "params.labels ['toxic'] are not labels"),
    ],
)
def test_bad_classification_requests_are_a_400_naming_the_field(
    base_url: str, model: str, params: dict[str, object], fragment: str
) -> None:
    r = extract(base_url, model, {"items": [{"text": TEXT}], "params": params})
    assert r.status_code == 400, r.text
    assert r.headers["x-sie-error-code"] == "INVALID_INPUT"
    assert fragment in r.json()["detail"]["message"]
    assert extract(base_url, TINY_SENTIMENT, {"items": [{"text": TEXT}]}).status_code == 200  # still serving


def test_gliclass_and_a_fixed_label_head_answer_on_the_same_path(base_url: str) -> None:
    body = {"items": [{"text": TEXT}], "params": {"labels": LABELS, "options": {"classification_type": "single"}}}
    [gli] = answer(base_url, TINY_GLICLASS, body)
    assert math.isclose(sum(c["score"] for c in gli["classifications"]), 1.0, abs_tol=1e-5)
    [sentiment] = answer(base_url, TINY_SENTIMENT, {"items": [{"text": TEXT}]})
    assert sorted(c["label"] for c in sentiment["classifications"]) == ["NEGATIVE", "POSITIVE"]


def test_openai_moderations_create_works_unchanged(base_url: str) -> None:
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0, timeout=120) as client:
        result = client.moderations.create(model="omni-moderation-latest", input=["you are great", TEXT])
        named = client.moderations.create(model=MODERATION, input="hello world")
    assert result.model == MODERATION and len(result.results) == 2 and len(named.results) == 1
    for moderation in [*result.results, *named.results]:
        scores = moderation.model_dump(exclude_none=True)["category_scores"]
        flags = moderation.model_dump(exclude_none=True)["categories"]
        assert set(scores) == set(TOXIC_LABELS) == set(flags)
        assert all(flags[k] == (scores[k] >= 0.5) for k in TOXIC_LABELS)  # the config's threshold
        assert moderation.flagged == any(flags.values())
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0, timeout=120)
    with client, pytest.raises(openai.BadRequestError):
        client.moderations.create(model=MODERATION, input=[""])


def test_vllm_classify_shape(base_url: str) -> None:
    r = httpx.post(f"{base_url}/v1/classify", json={"model": TINY_SENTIMENT, "input": [TEXT, "hello"]}, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "list" and body["model"] == TINY_SENTIMENT and body["id"].startswith("classify-")
    assert [d["index"] for d in body["data"]] == [0, 1]
    for d in body["data"]:
        assert d["num_classes"] == 2 and len(d["probs"]) == 2 and math.isclose(sum(d["probs"]), 1.0, abs_tol=1e-5)
        assert d["label"] == ["NEGATIVE", "POSITIVE"][d["probs"].index(max(d["probs"]))]
    assert body["usage"]["prompt_tokens"] > 0 and body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"]
    bad = httpx.post(f"{base_url}/v1/classify", json={"model": "test/tiny-embedder", "input": "x"}, timeout=60)
    assert bad.status_code == 400


SDK_SCRIPT = """
import json, sys
from sie_sdk import SIEClient
from sie_sdk.types import Item
with SIEClient(sys.argv[1], timeout_s=120) as client:
    one = client.extract(sys.argv[2], Item(id="a", text="the invoice total is due"), labels=["billing", "sports"])
    many = client.extract(sys.argv[2], [Item(text="hello"), Item(text="world")], labels=["billing", "sports"],
                          options={"multi_label": True})
print(json.dumps({"id": one["id"], "labels": [c["label"] for c in one["classifications"]],
                  "scores": [c["score"] for c in one["classifications"]], "count": len(many)}))
"""


@pytest.mark.skipif(not COMPAT_PYTHON.exists(), reason="no .venv-compat with sie-sdk 0.10.1 (make test creates it)")
def test_published_sdk_extracts_with_labels_on_a_classifier(base_url: str) -> None:
    run = subprocess.run(
        [str(COMPAT_PYTHON), "-c", SDK_SCRIPT, base_url, TINY_NLI], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["id"] == "a" and sorted(report["labels"]) == ["billing", "sports"] and report["count"] == 2
    assert report["scores"] == sorted(report["scores"], reverse=True)
