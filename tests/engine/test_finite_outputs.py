"""NaN and Inf outputs (issue 46, item 2), on a real server process with real BERT classes whose
weights are doctored so that one word breaks them:

- ``OVERFLOW_WORD``: its embedding is fp16's largest number in one dimension, where every position
  embedding adds 32: inf in fp16 (65,536 is past 65,504), an ordinary spike in float32. A model that
  runs in fp16 answers it from its float32 rerun.
- ``NAN_WORD``: its embedding is NaN: NaN in every precision. Its request gets NON_FINITE_OUTPUT; the
  other requests of its batch are answered.

Every other token has 0 in that dimension (its word embedding -32 there, its position +32), so other
texts are ordinary. The counters ``sie_nonfinite_reruns_total`` and ``sie_nonfinite_failures_total``
are read from ``/metrics``, and the result cache (on, as by default) is checked never to keep a
non-finite answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from sie_server.engine.finite import finite
from tests.helpers.catalog import tiny_cross_encoder, tiny_embedder, write_config
from tests.helpers.fault_adapters import FAULT_LOG
from tests.helpers.metrics import scrape
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_models import vocabulary, wordpiece
from tests.helpers.wait import async_wait_until

OVERFLOW_WORD = "server"  # neither word is in the CPU precision gate's probe texts (the bf16 model passes it)
NAN_WORD = "passage"
FP16 = "test/finite-fp16"  # the held embedder (tests/helpers/fault_adapters.py: PoisonEmbedding) in fp16
FP32 = "test/finite-fp32"  # the same weights in float32
BF16 = "test/finite-bf16"  # the same weights behind the CPU gate with bf16 first
RERANKER = "test/finite-reranker-fp16"  # a cross-encoder doctored the same way, in fp16
GOOD = ["hello world", "the invoice total is due", "acme corp"]


def doctor(embeddings: Any) -> None:
    """Doctor a BERT embeddings module in place (see the module's doc)."""
    import torch

    vocab = vocabulary()
    with torch.no_grad():
        embeddings.word_embeddings.weight[:, 0] = -32.0
        embeddings.word_embeddings.weight[vocab.index(OVERFLOW_WORD), 0] = 65504.0
        embeddings.word_embeddings.weight[vocab.index(NAN_WORD)] = float("nan")
        embeddings.position_embeddings.weight[:, 0] = 32.0
        embeddings.token_type_embeddings.weight[:, 0] = 0.0


def build(folder: Path, *, scorer: bool) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    config = BertConfig(
        vocab_size=len(vocabulary()),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
    )
    torch.manual_seed(46)
    model = BertForSequenceClassification(config) if scorer else BertModel(config)
    doctor(model.bert.embeddings if scorer else model.embeddings)
    model.eval().save_pretrained(folder)
    wordpiece(vocabulary()).save_pretrained(folder)
    return folder


@dataclass
class Doctored:
    server: ServerProcess
    faults: Path
    log: Path

    @property
    def hold(self) -> Path:
        return self.faults.with_name(self.faults.name + ".hold")  # fault_adapters.hold_file()

    def held(self) -> int:
        lines = self.faults.read_text().splitlines() if self.faults.exists() else []
        return sum(line.startswith("held ") for line in lines)

    def counted(self, what: str, model: str, kind: str = "encode") -> float:
        return scrape(self.server.url, f"sie_nonfinite_{what}_total", absent_as_zero=True, model=model, kind=kind)

    def encode(self, model: str, texts: list[str]) -> httpx.Response:
        items = [{"text": t} for t in texts]
        return httpx.post(f"{self.server.url}/v1/encode/{model}", json={"items": items}, timeout=60)


@pytest.fixture(scope="module")
def doctored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Doctored]:
    root = tmp_path_factory.mktemp("doctored")
    embedder, reranker = build(root / "embedder", scorer=False), build(root / "reranker", scorer=True)
    catalog = tmp_path_factory.mktemp("finite-catalog")
    fp16 = {"cpu": {"dtype": "float16", "max_batch_tokens": 2048}}
    held = {**tiny_embedder(FP16, embedder), "adapter": "tests.helpers.fault_adapters:PoisonEmbedding"}
    write_config(catalog, {**held, "profiles": fp16})
    write_config(catalog, tiny_embedder(FP32, embedder))
    gated = {"cpu": {"dtype": "float32", "max_batch_tokens": 2048, "cpu_precision": ["bf16", "fp32"]}}
    write_config(catalog, {**tiny_embedder(BF16, embedder), "profiles": gated})
    write_config(catalog, {**tiny_cross_encoder(RERANKER, reranker), "profiles": fp16})
    logs = tmp_path_factory.mktemp("finite-logs")
    faults = logs / "faults.txt"
    proc = ServerProcess(catalog, "--offline", "--threads", "1", env={FAULT_LOG: str(faults)}, log=logs / "s.log")
    try:
        yield Doctored(proc.wait_ready(), faults, logs / "s.log")
    finally:
        proc.stop()


def vector(response: httpx.Response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.array(response.json()["items"][0]["dense"]["values"], dtype=np.float32)


def test_finite_reads_every_number_of_a_result() -> None:
    sparse = (np.array([3, 7], np.int32), np.array([0.5, 1.0], np.float32))
    assert finite({"dense": np.ones(4, np.float32), "sparse": sparse, "chunks": np.zeros((0, 4))})
    assert finite(0.25) and finite("not a number") and finite([])
    assert not finite({"dense": np.array([0.0, np.nan], np.float32)})
    assert not finite({"sparse": (np.array([1]), np.array([np.inf], np.float32))})
    assert not finite(float("-inf")) and not finite([1.0, float("nan")])


def test_the_doctored_words_break_fp16_only_and_every_precision(doctored: Doctored) -> None:
    """The premise, in float32: the overflow word is an ordinary text there, the NaN word is not."""
    assert finite(vector(doctored.encode(FP32, [f"the {OVERFLOW_WORD} is up"])))
    failures = doctored.counted("failures", FP32)
    r = doctored.encode(FP32, [f"a {NAN_WORD}"])
    assert r.status_code == 502 and r.headers["x-sie-error-code"] == "NON_FINITE_OUTPUT", r.text
    message = r.json()["detail"]["message"]
    assert message == f"model {FP32} gave a non-finite encode output (NaN or Inf) in fp32"
    assert doctored.counted("failures", FP32) == failures + 1
    assert doctored.counted("reruns", FP32) == 0  # a float32 model has nothing to run it again in


def test_in_fp16_an_overflow_is_answered_from_fp32_and_a_nan_fails_alone(doctored: Doctored) -> None:
    overflow, broken = f"the {OVERFLOW_WORD} is up", f"a {NAN_WORD}"
    reference = vector(doctored.encode(FP32, [overflow]))
    assert finite(vector(doctored.encode(FP16, ["warm up"])))  # loaded (and warmed up) before anything is held
    texts = [*GOOD, overflow, broken]

    async def together() -> list[httpx.Response]:
        """While a first request holds the model, the five queue behind it: they run as one batch."""
        url = f"{doctored.server.url}/v1/encode/{FP16}"
        held = doctored.held()
        doctored.hold.touch()
        try:
            async with httpx.AsyncClient(timeout=60) as client:
                blocker = asyncio.ensure_future(client.post(url, json={"items": [{"text": "occupy"}]}))
                await async_wait_until(lambda: doctored.held() > held, message="the first batch was never held")
                answers = asyncio.gather(*(client.post(url, json={"items": [{"text": t}]}) for t in texts))
                await async_wait_until(
                    lambda: scrape(doctored.server.url, "sie_queue_items", model=FP16, priority="interactive") == 5,
                    message="the five requests never queued",
                )
                doctored.hold.unlink()
                assert (await blocker).status_code == 200
                return list(await answers)
        finally:
            doctored.hold.unlink(missing_ok=True)

    reruns, failures = doctored.counted("reruns", FP16), doctored.counted("failures", FP16)
    *good, answered, failed = asyncio.run(together())
    assert "2 of 5 encode items not finite in fp16; 1 answered from float32, 1 failed" in doctored.log.read_text()
    assert all(finite(vector(r)) for r in good)
    rerun = vector(answered)
    assert finite(rerun)
    # fp16 weights run in float32 against the float32 weights: the same vector but for fp16's rounding of them
    assert float(rerun @ reference) > 0.999 and np.abs(rerun - reference).max() < 0.01
    assert failed.status_code == 502 and failed.headers["x-sie-error-code"] == "NON_FINITE_OUTPUT", failed.text
    message = failed.json()["detail"]["message"]
    assert message == f"model {FP16} gave a non-finite encode output (NaN or Inf) in fp16 and again when run in float32"
    assert doctored.counted("reruns", FP16) == reruns + 2
    assert doctored.counted("failures", FP16) == failures + 1

    # the float32 answer was cached (a hit, the same bits, nothing run again); the non-finite one never is
    again = doctored.encode(FP16, [overflow])
    assert again.json()["timing"]["cache_hits"] == 1 and np.array_equal(vector(again), rerun)
    assert doctored.encode(FP16, [broken]).status_code == 502
    assert doctored.counted("reruns", FP16) == reruns + 3, "the failed item was not run again: it was cached"
    assert doctored.counted("failures", FP16) == failures + 2


def test_a_cross_encoder_in_fp16_reruns_and_fails_per_item(doctored: Doctored) -> None:
    url = f"{doctored.server.url}/v1/score/{RERANKER}"
    reruns, failures = doctored.counted("reruns", RERANKER, "score"), doctored.counted("failures", RERANKER, "score")
    documents = [*GOOD, f"the {OVERFLOW_WORD} is up"]
    body = {"query": {"text": "hello"}, "items": [{"id": f"d{k}", "text": t} for k, t in enumerate(documents)]}
    r = httpx.post(url, json=body, timeout=60)
    assert r.status_code == 200, r.text
    scores = r.json()["scores"]
    assert len(scores) == 4 and all(np.isfinite(s["score"]) for s in scores)
    assert doctored.counted("reruns", RERANKER, "score") == reruns + 1
    body["items"] = [{"text": f"a {NAN_WORD}"}]
    r = httpx.post(url, json=body, timeout=60)
    assert r.status_code == 502 and r.headers["x-sie-error-code"] == "NON_FINITE_OUTPUT", r.text
    assert doctored.counted("reruns", RERANKER, "score") == reruns + 2
    assert doctored.counted("failures", RERANKER, "score") == failures + 1


def test_behind_the_bf16_gate_a_nan_is_run_again_in_float32(doctored: Doctored) -> None:
    assert finite(vector(doctored.encode(BF16, GOOD[:1])))  # loads it: the gate chooses its precision
    running = httpx.get(f"{doctored.server.url}/v1/models/{BF16}", timeout=30).json()["precision"]["running"]
    assert running in ("bf16", "fp32")  # fp32 where the CPU has no bf16 (the gate says so)
    reruns = doctored.counted("reruns", BF16)
    r = doctored.encode(BF16, [f"a {NAN_WORD}"])
    assert r.status_code == 502 and r.headers["x-sie-error-code"] == "NON_FINITE_OUTPUT", r.text
    if running == "bf16":
        assert r.json()["detail"]["message"].endswith("in bf16 and again when run in float32")
        assert doctored.counted("reruns", BF16) == reruns + 1
    else:
        assert r.json()["detail"]["message"].endswith("in fp32")
        assert doctored.counted("reruns", BF16) == reruns
