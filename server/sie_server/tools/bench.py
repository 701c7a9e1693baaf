"""``sie-server bench MODEL``: a seeded synthetic corpus against a running server, to size a machine.

The model's tasks (``GET /v1/models/{id}``) choose the route: generate for generators, encode for
encoders, score for rerankers, extract for extractors. One text per request, ``concurrency``
requests in flight; one untimed request first loads the model. Throughput, latency percentiles
and the padding ratio (padded over real tokens, from ``/metrics`` before and after) are printed.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

import httpx

WORDS = (
    "invoice payment contract customer order delivery account balance report revenue quarter region "
    "server model memory batch latency token request query document passage answer question search "
    "index vector score rank entity person company city date amount total due the a of to and in for "
    "with on by from at is was are be this that which it as an or not we you they"
).split()
LOAD_TIMEOUT_S = 600.0


class BenchError(Exception):
    """The bench cannot run: one line for the person running it."""


def corpus(n: int, seed: int) -> list[str]:
    """``n`` texts of varied lengths (4 to 256 words, log-uniform), the same for the same seed."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=int(4 * 64 ** rng.random()))) for _ in range(n)]


def route_for(tasks: list[str]) -> str:
    for task in ("generate", "encode", "score", "extract"):
        if task in tasks:
            return task
    raise BenchError(f"the model has no task bench knows (tasks: {', '.join(tasks) or 'none'})")


def body(task: str, text: str) -> dict[str, Any]:
    if task == "generate":
        return {"prompt": text[:400], "max_new_tokens": 16}
    if task == "score":
        return {"query": {"text": "what is due and when?"}, "items": [{"text": text}]}
    return {"items": [{"text": text}]}


@dataclass(frozen=True)
class Result:
    task: str
    texts: int
    failed: int
    seconds: float
    latencies: list[float]  # seconds, of the requests that succeeded
    padding_ratio: float | None

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

    def lines(self, model: str, concurrency: int) -> list[str]:
        rate = (self.texts - self.failed) / self.seconds if self.seconds else 0.0
        padding = f"{self.padding_ratio:.3f}" if self.padding_ratio is not None else "n/a (no batches counted)"
        p = {q: self.percentile(q) * 1000 for q in (0.5, 0.9, 0.99)}
        return [
            f"{model}: {self.task}, {self.texts} texts sent, {self.failed} failed, concurrency {concurrency}",
            f"throughput: {rate:.1f} texts/s over {self.seconds:.2f} s",
            f"latency: p50 {p[0.5]:.1f} ms  p90 {p[0.9]:.1f} ms  p99 {p[0.99]:.1f} ms",
            f"padding ratio: {padding} (padded / real tokens, from /metrics)",
        ]


def token_counters(text: str, model: str) -> tuple[float, float]:
    """(real, padded) tokens the server has run for ``model``, from its /metrics text."""
    from prometheus_client.parser import text_string_to_metric_families

    found = {"sie_real_tokens": 0.0, "sie_padded_tokens": 0.0}
    for family in text_string_to_metric_families(text):
        if family.name in found:
            found[family.name] = sum(
                s.value for s in family.samples if s.labels.get("model") == model and s.name.endswith("_total")
            )
    return found["sie_real_tokens"], found["sie_padded_tokens"]


async def _tasks_of(client: httpx.AsyncClient, model: str) -> list[str]:
    answer = await client.get(f"/v1/models/{model}")
    if answer.status_code == 404:
        raise BenchError(f"the server does not serve {model}")
    answer.raise_for_status()
    return list(answer.json()["tasks"])


async def _post(client: httpx.AsyncClient, task: str, model: str, text: str) -> httpx.Response:
    return await client.post(f"/v1/{task}/{model}", json=body(task, text))


async def _warm(client: httpx.AsyncClient, task: str, model: str) -> None:
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while True:
        answer = await _post(client, task, model, "warm up")
        if answer.status_code == 200:
            return
        if answer.status_code != 503 or time.monotonic() > deadline:
            raise BenchError(f"the first request to {model} failed: HTTP {answer.status_code} {answer.text[:200]}")
        await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))


async def bench(url: str, model: str, texts: int, concurrency: int, seed: int) -> Result:
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url.rstrip("/"), timeout=600.0, limits=limits) as client:
        task = route_for(await _tasks_of(client, model))
        await _warm(client, task, model)
        real0, padded0 = token_counters((await client.get("/metrics")).text, model)
        gate = asyncio.Semaphore(concurrency)
        latencies: list[float] = []
        failed = 0

        async def one(text: str) -> None:
            nonlocal failed
            async with gate:
                began = time.perf_counter()
                try:
                    answer = await _post(client, task, model, text)
                except httpx.HTTPError:
                    failed += 1
                    return
                if answer.status_code == 200:
                    latencies.append(time.perf_counter() - began)
                else:
                    failed += 1

        began = time.perf_counter()
        await asyncio.gather(*(one(t) for t in corpus(texts, seed)))
        seconds = time.perf_counter() - began
        real1, padded1 = token_counters((await client.get("/metrics")).text, model)
    real = real1 - real0
    ratio = (padded1 - padded0) / real if real > 0 else None
    return Result(task, texts, failed, seconds, latencies, ratio)


def run(url: str, model: str, texts: int, concurrency: int, seed: int) -> int:
    """The command: the figures on stdout (exit 0, or 1 when any request failed); one line on stderr
    and 1 when the bench cannot run."""
    import sys

    try:
        result = asyncio.run(bench(url, model, texts, concurrency, seed))
    except BenchError as exc:
        print(f"sie-server: bench {model}: {exc}", file=sys.stderr)
        return 1
    except httpx.HTTPError as exc:
        print(f"sie-server: bench {model}: {url}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for line in result.lines(model, concurrency):
        print(line)
    return 1 if result.failed else 0
