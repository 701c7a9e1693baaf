"""One request can never fail another, on a real server process: a poisoned request (tests/helpers/
fault_adapters.py: its prompt or text makes the model fail) among three good ones fails alone with a
clear code; the three get 200 and their full answers. Generation on both decode backends (transformers
and llama.cpp), streamed and not, and encode."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.helpers.catalog import tiny_embedder, tiny_llm, write_config
from tests.helpers.fault_adapters import FAULT_LOG, POISON_ENCODE, POISON_NAN, POISON_PREFILL, POISON_STEP
from tests.helpers.metrics import scrape
from tests.helpers.server import ServerProcess
from tests.helpers.wait import async_wait_until
from tests.server.test_llamacpp import variant

FAULTS = "tests.helpers.fault_adapters"
TINY = "test/poison-llm"  # the tiny Llama on transformers
LLAMA = "test/poison-smollm"  # SmolLM2 on llama.cpp
EMBEDDER = "test/poison-embedder"
NEW_TOKENS = 30  # 30 steps of at least 20 ms: the first sequence still runs when the others join it
GOOD = ["hello world", "the invoice total", "acme corp"]


@dataclass
class Poisoned:
    server: ServerProcess
    faults: Path

    @property
    def hold(self) -> Path:
        return self.faults.with_name(self.faults.name + ".hold")  # fault_adapters.hold_file()

    def faults_seen(self, kind: str) -> list[int]:
        """The batch sizes at which an injected fault of this kind fired."""
        if not self.faults.exists():
            return []
        rows = [line.split() for line in self.faults.read_text().splitlines()]
        return [int(n) for k, n in rows if k == kind]


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Iterator[Poisoned]:
    catalog = tmp_path_factory.mktemp("poison-catalog")
    write_config(catalog, {**tiny_llm(TINY, tiny_models["llm"]), "adapter": f"{FAULTS}:PoisonLM"})
    llama = variant(LLAMA, cpu={"max_batch_tokens": 1024}, max_sequence_length=1024)
    llama["adapter"] = f"{FAULTS}:PoisonLlamaCpp"
    write_config(catalog, llama)
    write_config(catalog, {**tiny_embedder(EMBEDDER, tiny_models["embedder"]), "adapter": f"{FAULTS}:PoisonEmbedding"})
    logs = tmp_path_factory.mktemp("poison-logs")
    faults = logs / "faults.txt"
    proc = ServerProcess(
        catalog,
        *("--offline", "--threads", "1", "--preload", f"{TINY},{LLAMA}"),
        *("--encode-cache", "0"),  # the same texts are sent again and must reach the batch each time
        env={FAULT_LOG: str(faults)},
        log=logs / "server.log",
    )
    try:
        yield Poisoned(proc.wait_ready(timeout_s=300), faults)
    finally:
        proc.stop()


def body(prompt: str, *, stream: bool = False) -> dict[str, object]:
    return {"prompt": prompt, "max_new_tokens": NEW_TOKENS, "temperature": 0, "stream": stream}


def retries(url: str, model: str, kind: str) -> float:
    """How many failed batches of this kind the server has run again apart (its metrics)."""
    return scrape(url, "sie_isolation_retries_total", absent_as_zero=True, model=model, kind=kind)


def events(text: str) -> list[dict[str, object]]:
    lines = [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]", text
    return [json.loads(line) for line in lines[:-1]]


@dataclass
class Outcome:
    streamed: list[dict[str, object]]  # the first good request's events
    good: list[httpx.Response]  # the other two good requests
    poison: httpx.Response


async def beside_good_ones(url: str, model: str, poison: str, *, stream_poison: bool) -> Outcome:
    """A streamed good request that is already decoding, then two more good ones and the poisoned one
    at once: they join the running batch together."""
    path = f"/v1/generate/{model}"
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        async with client.stream("POST", path, json=body(GOOD[0], stream=True)) as first:
            assert first.status_code == 200
            lines = first.aiter_lines()
            seen = [await anext(lines)]  # its first piece of text: it is in the decode batch now
            others = asyncio.gather(
                *(client.post(path, json=body(p)) for p in GOOD[1:]),
                client.post(path, json=body(poison, stream=stream_poison)),
            )
            seen += [line async for line in lines]
        *good, bad = await others
    return Outcome(events("\n".join(seen)), good, bad)


def answers_alone(url: str, model: str) -> list[str]:
    """Each good prompt's greedy text, generated with nothing else running."""
    texts = []
    for prompt in GOOD:
        r = httpx.post(f"{url}/v1/generate/{model}", json=body(prompt), timeout=300)
        assert r.status_code == 200, r.text
        texts.append(r.json()["text"])
    return texts


def assert_good_ones_finished(outcome: Outcome, alone: list[str] | None) -> None:
    assert all("detail" not in e for e in outcome.streamed), outcome.streamed
    streamed_text = "".join(str(e["text"]) for e in outcome.streamed)
    assert outcome.streamed[-1]["finish_reason"] == "length"
    assert outcome.streamed[-1]["usage"]["completion_tokens"] == NEW_TOKENS  # type: ignore[index]
    for r in outcome.good:
        assert r.status_code == 200, r.text
        assert r.json()["finish_reason"] == "length" and r.json()["usage"]["completion_tokens"] == NEW_TOKENS
    if alone is not None:  # greedy: the same text as each gets alone
        assert [streamed_text, *(r.json()["text"] for r in outcome.good)] == alone


@pytest.mark.parametrize("model", [TINY, LLAMA])
def test_a_decode_step_that_fails_is_retried_apart_and_only_the_poisoned_sequence_fails(
    poisoned: Poisoned, model: str
) -> None:
    alone = answers_alone(poisoned.server.url, model)
    before = len(poisoned.faults_seen("step"))
    retried = retries(poisoned.server.url, model, "decode")
    outcome = asyncio.run(beside_good_ones(poisoned.server.url, model, f"{POISON_STEP} is open", stream_poison=False))
    assert max(poisoned.faults_seen("step")[before:]) >= 2, "the poisoned step never held other sequences"
    assert retries(poisoned.server.url, model, "decode") > retried, "no retry apart was counted"
    assert_good_ones_finished(outcome, alone if model == TINY else None)
    r = outcome.poison
    assert r.status_code == 400 and r.headers["x-sie-error-code"] == "INVALID_INPUT"
    assert "cannot process this input" in r.json()["detail"]["message"]


@pytest.mark.parametrize("model", [TINY, LLAMA])
def test_a_sequence_with_non_finite_logits_ends_alone_with_an_error_event(poisoned: Poisoned, model: str) -> None:
    alone = answers_alone(poisoned.server.url, model)
    before = len(poisoned.faults_seen("nan"))
    outcome = asyncio.run(beside_good_ones(poisoned.server.url, model, f"{POISON_NAN} is served", stream_poison=True))
    assert max(poisoned.faults_seen("nan")[before:]) >= 2, "the poisoned row never shared a step"
    assert_good_ones_finished(outcome, alone if model == TINY else None)
    r = outcome.poison
    assert r.status_code == 200  # streamed: the error comes as an event, for this stream only
    last = events(r.text)[-1]
    assert last["detail"] == {  # type: ignore[comparison-overlap]
        "code": "INFERENCE_ERROR",
        "message": f"model {model} produced non-finite scores for this sequence",
    }


@pytest.mark.parametrize("model", [TINY, LLAMA])
def test_a_prefill_that_fails_is_retried_apart(poisoned: Poisoned, model: str) -> None:
    before = len(poisoned.faults_seen("prefill"))
    retried = retries(poisoned.server.url, model, "prefill")
    outcome = asyncio.run(beside_good_ones(poisoned.server.url, model, f"{POISON_PREFILL} is due", stream_poison=False))
    assert_good_ones_finished(outcome, None)
    seen = poisoned.faults_seen("prefill")[before:]
    r = outcome.poison
    # prefilled with others, it failed alone when retried (the others were served): the caller's input;
    # prefilled alone, nothing tells its input from the model: a server error
    expected = (400, "INVALID_INPUT") if seen[0] >= 2 else (500, "INFERENCE_ERROR")
    assert (r.status_code, r.headers["x-sie-error-code"]) == expected, (seen, r.text)
    assert seen[-1] == 1  # the retry ran it alone
    assert retries(poisoned.server.url, model, "prefill") > retried, "no retry apart was counted"


def test_an_encode_batch_that_fails_is_run_apart_and_only_the_poisoned_request_fails(poisoned: Poisoned) -> None:
    url = f"{poisoned.server.url}/v1/encode/{EMBEDDER}"
    texts = [[g, f"{g} is due"] for g in GOOD]
    reference = httpx.post(url, json={"items": [{"text": t} for pair in texts for t in pair]}, timeout=60)
    assert reference.status_code == 200, reference.text
    expected = [np.array(i["dense"]["values"]) for i in reference.json()["items"]]

    async def together() -> list[httpx.Response]:
        """While a first request holds the model, the four queue behind it: they run as one batch."""
        held = len(poisoned.faults_seen("held"))
        poisoned.hold.touch()
        try:
            async with httpx.AsyncClient(timeout=60) as client:
                blocker = asyncio.ensure_future(client.post(url, json={"items": [{"text": "occupy"}]}))
                await async_wait_until(lambda: len(poisoned.faults_seen("held")) > held, message="never held")
                calls = [client.post(url, json={"items": [{"text": t} for t in pair]}) for pair in texts]
                calls.insert(1, client.post(url, json={"items": [{"text": f"{POISON_ENCODE} menu"}]}))
                answers = asyncio.gather(*calls)
                await async_wait_until(
                    lambda: (
                        scrape(
                            poisoned.server.url,
                            "sie_queue_items",
                            absent_as_zero=True,
                            model=EMBEDDER,
                            priority="interactive",
                        )
                        == 7
                    ),
                    message="the four requests never queued",
                )
                poisoned.hold.unlink()
                assert (await blocker).status_code == 200
                return list(await answers)
        finally:
            poisoned.hold.unlink(missing_ok=True)

    before = len(poisoned.faults_seen("encode"))
    retried = retries(poisoned.server.url, EMBEDDER, "encode")
    answers = asyncio.run(together())
    poison = answers.pop(1)
    assert poisoned.faults_seen("encode")[before] == 7, "the four requests did not share one batch"
    assert retries(poisoned.server.url, EMBEDDER, "encode") == retried + 1, "the batch was not counted as run apart"
    assert poison.status_code == 400 and poison.headers["x-sie-error-code"] == "INVALID_INPUT"
    assert "cannot process this input" in poison.json()["detail"]["message"]
    assert all(r.status_code == 200 for r in answers), [r.text for r in answers]
    vectors = [np.array(i["dense"]["values"]) for r in answers for i in r.json()["items"]]
    assert len(vectors) == 6 and all(np.allclose(v, e, atol=1e-5) for v, e in zip(vectors, expected, strict=True))


def test_the_server_still_serves_the_poisoned_models(poisoned: Poisoned) -> None:
    for model in (TINY, LLAMA):
        r = httpx.post(f"{poisoned.server.url}/v1/generate/{model}", json=body("hello world"), timeout=300)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == NEW_TOKENS
    r = httpx.post(f"{poisoned.server.url}/v1/encode/{EMBEDDER}", json={"items": [{"text": "hello"}]}, timeout=60)
    assert r.status_code == 200
