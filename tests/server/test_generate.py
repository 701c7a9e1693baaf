"""Generation over HTTP with a tiny random Llama: native and OpenAI shapes, streaming, stops, usage, errors."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.helpers.metrics import find, parse

LLM = "test/tiny-llm"


def generate(base_url: str, body: dict[str, object], path: str = f"/v1/generate/{LLM}") -> httpx.Response:
    return httpx.post(f"{base_url}{path}", json=body, timeout=120)


def sse(response: httpx.Response) -> list[object]:
    events = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_generate_length_and_usage(base_url: str) -> None:
    r = generate(base_url, {"prompt": "hello world", "max_new_tokens": 7, "seed": 1})
    assert r.status_code == 200
    body = r.json()
    assert body["model"] == LLM and body["finish_reason"] in ("length", "stop")
    usage = body["usage"]
    assert usage["prompt_tokens"] == 4  # [CLS] hello world [SEP], as the tiny tokenizer frames a text
    assert 1 <= usage["completion_tokens"] <= 7
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_greedy_is_deterministic_and_seeded_sampling_repeats(base_url: str) -> None:
    greedy = [generate(base_url, {"prompt": "the invoice", "max_new_tokens": 10}).json()["text"] for _ in range(2)]
    assert greedy[0] == greedy[1]
    body = {"prompt": "the invoice", "max_new_tokens": 10, "temperature": 1.0, "seed": 42}
    sampled = [generate(base_url, body).json()["text"] for _ in range(2)]
    assert sampled[0] == sampled[1]


def test_stream_deltas_join_to_the_full_text(base_url: str) -> None:
    body = {"messages": [{"role": "user", "content": "hello"}], "max_new_tokens": 12}
    full = generate(base_url, body).json()
    streamed = httpx.post(f"{base_url}/v1/generate/{LLM}", json={**body, "stream": True}, timeout=120)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    chunks = sse(streamed)
    assert "".join(c["text"] for c in chunks) == full["text"]  # type: ignore[index]
    assert chunks[-1]["finish_reason"] == full["finish_reason"]  # type: ignore[index]
    assert chunks[-1]["usage"] == full["usage"]  # type: ignore[index]


def test_stop_string_cuts_the_text(base_url: str) -> None:
    free = generate(base_url, {"prompt": "hello", "max_new_tokens": 20}).json()["text"]
    # greedy decoding of seeded weights: the same text every run, long enough to pick a stop string from
    assert len(free) >= 4, f"the tiny model's greedy answer to 'hello' is too short: {free!r}"
    stop = free[2:4]
    cut = generate(base_url, {"prompt": "hello", "max_new_tokens": 20, "stop": [stop]}).json()
    assert cut["finish_reason"] == "stop"
    assert cut["text"] == free[: free.find(stop)]


def test_concurrent_requests_are_decoded_together(base_url: str) -> None:
    def count(absent_as_zero: bool = False) -> tuple[float, float]:
        samples = parse(httpx.get(f"{base_url}/metrics").text)
        rows = find(samples, "sie_batch_items_sum", {"model": LLM}, absent_as_zero=absent_as_zero)
        return rows, find(samples, "sie_batch_items_count", {"model": LLM}, absent_as_zero=absent_as_zero)

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
            body = {"prompt": "hello world", "max_new_tokens": 16}
            return list(await asyncio.gather(*(client.post(f"/v1/generate/{LLM}", json=body) for _ in range(8))))

    rows_before, steps_before = count(absent_as_zero=True)  # no series yet if nothing was generated before
    answers = asyncio.run(burst())
    assert all(a.status_code == 200 for a in answers)
    texts = {a.json()["text"] for a in answers}
    assert len(texts) == 1  # greedy: batching does not change the answer
    rows, steps = count()
    assert rows - rows_before > steps - steps_before  # steps carried several sequences at once


def test_openai_chat_completions(base_url: str) -> None:
    body = {"model": LLM, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8, "temperature": 0}
    r = generate(base_url, body, "/v1/chat/completions").json()
    assert r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-")
    assert r["choices"][0]["message"]["role"] == "assistant"
    assert r["usage"]["completion_tokens"] <= 8
    stream = httpx.post(f"{base_url}/v1/chat/completions", json={**body, "stream": True}, timeout=120)
    chunks = sse(stream)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)  # type: ignore[index]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)  # type: ignore[index]
    assert text == r["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == r["choices"][0]["finish_reason"]  # type: ignore[index]


def test_openai_completions(base_url: str) -> None:
    body = {"model": LLM, "prompt": "hello", "max_tokens": 5, "temperature": 0}
    r = generate(base_url, body, "/v1/completions").json()
    assert r["object"] == "text_completion" and r["usage"]["completion_tokens"] <= 5
    chunks = sse(httpx.post(f"{base_url}/v1/completions", json={**body, "stream": True}, timeout=120))
    assert "".join(c["choices"][0]["text"] for c in chunks) == r["choices"][0]["text"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"max_new_tokens": 5}, "exactly one of `prompt` or `messages`"),
        ({"prompt": "a", "messages": [{"role": "user", "content": "b"}]}, "exactly one"),
        ({"prompt": "a", "max_new_tokens": 100000}, "exceeds model test/tiny-llm's context length"),
        ({"prompt": "a", "temperature": -1}, "temperature"),
        ({"messages": [{"role": "wizard", "content": "b"}]}, "messages.0.role"),
    ],
)
def test_generate_errors(base_url: str, body: dict[str, object], fragment: str) -> None:
    r = generate(base_url, body)
    assert r.status_code == 400 and r.headers["x-sie-error-code"] == "INVALID_INPUT"
    assert fragment in r.json()["detail"]["message"]


def test_generate_on_an_encoder_is_refused(base_url: str) -> None:
    r = httpx.post(f"{base_url}/v1/generate/test/tiny-embedder", json={"prompt": "x"})
    assert r.status_code == 400 and "does not support generate" in r.json()["detail"]["message"]
