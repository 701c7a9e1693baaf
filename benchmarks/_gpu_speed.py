"""The GPU check's speed figures, each beside an in-process baseline on the same device, weights and precision:
encode through the server (one large request; many concurrent clients) against sentence-transformers, and
generation tokens/s (one stream; several) against transformers' own ``generate``."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from sie_sdk import SIEAsyncClient


@dataclass(frozen=True)
class Plan:
    """How much work each measurement gets (the GPU's, or the CPU dry run's small one)."""

    corpus: int  # texts of the encode corpus (the large request holds them all)
    clients: int  # concurrent clients, one text per request
    seconds: float  # how long the clients run
    st_batches: tuple[int, ...]  # sentence-transformers batch sizes tried (its best is the baseline)
    new_tokens: int  # tokens each generation makes
    streams: int  # concurrent generations


GPU_PLAN = Plan(corpus=8192, clients=64, seconds=8.0, st_batches=(32, 256), new_tokens=128, streams=8)
CPU_PLAN = Plan(corpus=256, clients=8, seconds=1.5, st_batches=(32,), new_tokens=16, streams=4)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


async def _large_request(url: str, model: str, texts: list[str], repeats: int) -> float:
    async with SIEAsyncClient(url, timeout=600) as client:
        await client.encode(model, texts[:64])
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            await client.encode(model, texts)
            best = min(best, time.perf_counter() - started)
    return len(texts) / best


def sie_large_request(url: str, model: str, texts: list[str], repeats: int = 3) -> float:
    """Texts/s of one request holding the whole corpus (the best of ``repeats``)."""
    return asyncio.run(_large_request(url, model, texts, repeats))


async def _clients(url: str, model: str, texts: list[str], clients: int, seconds: float) -> tuple[float, float]:
    pool = [SIEAsyncClient(url, timeout=600) for _ in range(clients)]
    try:
        await asyncio.gather(*(c.encode(model, [texts[i]]) for i, c in enumerate(pool)))  # every connection open
        deadline = time.perf_counter() + seconds
        done = [0] * clients

        async def run(k: int) -> None:
            i = k
            while time.perf_counter() < deadline:
                await pool[k].encode(model, [texts[i % len(texts)]])
                done[k] += 1
                i += clients

        cpu, started = time.process_time(), time.perf_counter()
        await asyncio.gather(*(run(k) for k in range(clients)))
        wall = time.perf_counter() - started
        return sum(done) / wall, (time.process_time() - cpu) / wall
    finally:
        await asyncio.gather(*(c.aclose() for c in pool))


def sie_clients(url: str, model: str, texts: list[str], clients: int, seconds: float) -> tuple[float, float]:
    """(texts/s, the client's own CPU in cores) of ``clients`` concurrent callers sending one text per request."""
    return asyncio.run(_clients(url, model, texts, clients, seconds))


def st_rate(folder: Path, texts: list[str], device: str, dtype: str, batch_size: int) -> float:
    """Texts/s of in-process sentence-transformers on the same weights, device and precision (the best of two)."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device=device)
    model.to(getattr(torch, dtype))
    model.encode(texts[: batch_size * 2], batch_size=batch_size)
    best = float("inf")
    for _ in range(2):
        _sync(device)
        started = time.perf_counter()
        model.encode(texts, batch_size=batch_size)
        _sync(device)
        best = min(best, time.perf_counter() - started)
    del model
    _release(device)
    return len(texts) / best


def prompts(count: int) -> list[str]:
    return [f"Write a short note about the invoice number {i} for Acme Corp." for i in range(count)]


def sie_generate(url: str, model: str, streams: int, new_tokens: int) -> float:
    """Tokens/s of ``streams`` concurrent generations through the server (greedy, ``new_tokens`` each)."""

    async def one(client: httpx.AsyncClient, prompt: str) -> int:
        body = {"prompt": prompt, "max_new_tokens": new_tokens, "temperature": 0}
        response = await client.post(f"/v1/generate/{model}", json=body)
        response.raise_for_status()
        return int(response.json()["usage"]["completion_tokens"])

    async def run() -> float:
        async with httpx.AsyncClient(base_url=url, timeout=600) as client:
            await one(client, "warm up")
            started = time.perf_counter()
            tokens = sum(await asyncio.gather(*(one(client, p) for p in prompts(streams))))
            return tokens / (time.perf_counter() - started)

    return asyncio.run(run())


def hf_generate(folder: Path, device: str, dtype: str, streams: int, new_tokens: int) -> tuple[float, float]:
    """Tokens/s of transformers' ``generate`` on the same weights, device and precision (``streams`` prompts in one
    left-padded batch, greedy, exactly ``new_tokens`` each), and the milliseconds of one decode step's forward
    pass alone (no sampling or bookkeeping around it)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    tokenizer.padding_side = "left"
    model: Any = AutoModelForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, dtype)).to(device).eval()
    batch = tokenizer(prompts(streams), return_tensors="pt", padding=True).to(device)
    settings = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False}
    with torch.inference_mode():
        model.generate(**batch, max_new_tokens=4, min_new_tokens=4, do_sample=False)
        _sync(device)
        started = time.perf_counter()
        out = model.generate(**batch, **settings)
        _sync(device)
        seconds = time.perf_counter() - started
        step_ms = _decode_step_ms(model, batch, device)
    made = (out.shape[1] - batch["input_ids"].shape[1]) * streams
    del model
    _release(device)
    return made / seconds, step_ms


def _decode_step_ms(model: Any, batch: Any, device: str, steps: int = 16) -> float:
    """One new token's forward pass over a cache (the same token fed back each time), timed alone."""
    first = model(**batch, use_cache=True)
    cache, token = first.past_key_values, batch["input_ids"][:, -1:]
    mask = batch["attention_mask"]
    for _ in range(2):  # warm up
        mask = torch_cat_one(mask)
        cache = model(input_ids=token, attention_mask=mask, past_key_values=cache, use_cache=True).past_key_values
    _sync(device)
    started = time.perf_counter()
    for _ in range(steps):
        mask = torch_cat_one(mask)
        cache = model(input_ids=token, attention_mask=mask, past_key_values=cache, use_cache=True).past_key_values
    _sync(device)
    return (time.perf_counter() - started) / steps * 1000


def torch_cat_one(mask: Any) -> Any:
    import torch

    return torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)


def _release(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
