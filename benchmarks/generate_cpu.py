"""SmolLM2-135M-Instruct on the server's torch path (float32 transformers, the packaged GGUF converted once):
cold load, and decode throughput for one request and for 8 concurrent ones.

    .venv/bin/python -m benchmarks.generate_cpu [--tokens 64] [--threads 2]

Baseline, in the same run and thread count: transformers `generate` (greedy) on the same
converted weights, one prompt, and the 8 prompts as one left-padded batch. (The catalog serves
this model on llama.cpp; `benchmarks.generate_llamacpp` measures that path.)
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import httpx
import yaml

from tests.helpers.catalog import REAL_CATALOG, SMOLLM, write_config
from tests.helpers.server import ServerProcess

TORCH_ID = "bench/smollm2-torch"

PROMPTS = [
    "Write a short note thanking Acme Corp for their invoice.",
    "List three uses of a small language model.",
    "What is the capital of France?",
    "Explain what an embedding is in one paragraph.",
    "Give two tips for writing clear emails.",
    "Summarize why batching helps inference servers.",
    "Name three colors of the rainbow.",
    "What does a reranker do in a search pipeline?",
]


def torch_catalog(folder: Path) -> str:
    """The catalog's SmolLM2 under another id, on the transformers backend; returns the id."""
    data = yaml.safe_load((REAL_CATALOG / (SMOLLM.replace("/", "__") + ".yaml")).read_text())
    data["id"] = TORCH_ID
    data["profiles"]["cpu"]["backend"] = "transformers"
    write_config(folder, data)
    return TORCH_ID


def body(prompt: str, tokens: int) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": prompt}], "max_new_tokens": tokens, "temperature": 0}


async def concurrent(url: str, tokens: int) -> tuple[float, int]:
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        t0 = time.perf_counter()
        calls = [client.post(f"/v1/generate/{TORCH_ID}", json=body(p, tokens)) for p in PROMPTS]
        answers = await asyncio.gather(*calls)
        elapsed = time.perf_counter() - t0
    return elapsed, sum(a.json()["usage"]["completion_tokens"] for a in answers)


def baseline(folder: Path, tokens: int, threads: int) -> tuple[float, float]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(threads)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(folder).eval()

    def ids(prompts: list[str]) -> dict[str, torch.Tensor]:
        texts = [
            tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
            for p in prompts
        ]
        return dict(tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False))

    model.generate(**ids([PROMPTS[2]]), max_new_tokens=4, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    rates = []
    for prompts in ([PROMPTS[0]], PROMPTS):
        inputs = ids(prompts)
        t0 = time.perf_counter()
        out = model.generate(**inputs, max_new_tokens=tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        elapsed = time.perf_counter() - t0
        new = out[:, inputs["input_ids"].shape[1] :]
        made = int((new != tokenizer.pad_token_id).sum())
        rates.append(made / elapsed)
    return rates[0], rates[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        torch_catalog(Path(tmp))
        server = ServerProcess(Path(tmp), "--offline", "--threads", str(args.threads)).wait_ready()
        try:
            t0 = time.perf_counter()
            first = httpx.post(f"{server.url}/v1/generate/{TORCH_ID}", json=body(PROMPTS[2], 8), timeout=600)
            cold = time.perf_counter() - t0
            info = httpx.get(f"{server.url}/v1/models/{TORCH_ID}").json()
            print(
                f"cold first request {cold:.2f}s (load {info['load_seconds']:.2f}s from {info['weights_source']}); "
                f"answer: {first.json()['text']!r}"
            )
            t0 = time.perf_counter()
            single = httpx.post(f"{server.url}/v1/generate/{TORCH_ID}", json=body(PROMPTS[0], args.tokens), timeout=600)
            single_rate = single.json()["usage"]["completion_tokens"] / (time.perf_counter() - t0)
            elapsed, made = asyncio.run(concurrent(server.url, args.tokens))
            folder = Path(info["weights_path"]) if "weights_path" in info else None
        finally:
            server.stop()
    from sie_server.adapters.gguf import cache_root

    converted = folder or next((cache_root() / "gguf").glob("SmolLM2-135M-Instruct*"))
    base_single, base_batch = baseline(converted, args.tokens, args.threads)
    print(
        f"server, 1 request:    {single_rate:.1f} tokens/s   (transformers generate: {base_single:.1f}, "
        f"ratio {single_rate / base_single:.2f}x)"
    )
    print(
        f"server, 8 concurrent: {made / elapsed:.1f} tokens/s total   (transformers generate, batch of 8: "
        f"{base_batch:.1f}, ratio {made / elapsed / base_batch:.2f}x)"
    )


if __name__ == "__main__":
    main()
