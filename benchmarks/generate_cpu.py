"""SmolLM2-135M-Instruct on the server's torch path (float32 transformers, the packaged GGUF converted once):
cold load, and decode throughput for one request and for 8 concurrent ones.

    .venv/bin/python -m benchmarks.generate_cpu [--tokens 64] [--threads 2] [--rounds 3]

Baseline, in the same run and thread count: transformers `generate` (greedy) on the same
converted weights, one prompt, and the 8 prompts as one left-padded batch. Server and
baseline take turns, round after round (the server idles while `generate` runs in this
process), so drift in the machine's speed hits both; the median ratio is reported. (The catalog serves
this model on llama.cpp; `benchmarks.generate_llamacpp` measures that path.)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from benchmarks._common import Meter, cpu_model, wait_quiet
from tests.helpers.catalog import SMOLLM, real_config, write_config
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
    data = real_config(SMOLLM)
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


class Baseline:
    """transformers ``generate`` on the server's converted weights, in this process."""

    def __init__(self, folder: Path, threads: int):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(threads)
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.tokenizer.padding_side = "left"
        self.model = AutoModelForCausalLM.from_pretrained(folder).eval()
        self.run([PROMPTS[2]], 4)  # warm-up

    def run(self, prompts: list[str], tokens: int) -> tuple[float, int]:
        """Seconds and completion tokens (pad tokens of rows that ended early not counted)."""
        texts = [
            self.tokenizer.apply_chat_template(
                [{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False
            )
            for p in prompts
        ]
        inputs = dict(self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False))
        pad = self.tokenizer.pad_token_id
        t0 = time.perf_counter()
        out = self.model.generate(**inputs, max_new_tokens=tokens, do_sample=False, pad_token_id=pad)
        elapsed = time.perf_counter() - t0
        new = out[:, inputs["input_ids"].shape[1] :]
        return elapsed, int((new != pad).sum())


def single(url: str, tokens: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    answer = httpx.post(f"{url}/v1/generate/{TORCH_ID}", json=body(PROMPTS[0], tokens), timeout=600)
    return time.perf_counter() - t0, answer.json()["usage"]["completion_tokens"]


def timed(meter: Meter, run: Callable[[], tuple[float, int]]) -> tuple[float, float]:
    """Tokens/s of one run, and the cores other work took meanwhile."""
    meter.start()
    seconds, made = run()
    meter.stop()
    return made / seconds, meter.other_cpu_s / meter.seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="alternating server / generate rounds")
    parser.add_argument("--wait-quiet", type=float, default=0, help="wait up to this many seconds for a quiet machine")
    args = parser.parse_args()
    print(f"CPU {cpu_model()}; {args.threads} threads both sides; {wait_quiet(args.wait_quiet)}")
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
            from sie_server.adapters.runtime.gguf import cache_root

            base = Baseline(next((cache_root() / "gguf").glob("SmolLM2-135M-Instruct*")), args.threads)
            meter = Meter(server.proc.pid)
            ratios: dict[str, list[float]] = {"1 request": [], "8 concurrent": []}
            for round_no in range(1, args.rounds + 1):
                server_one, other_a = timed(meter, lambda: single(server.url, args.tokens))
                base_one, other_b = timed(meter, lambda: base.run([PROMPTS[0]], args.tokens))
                server_eight, other_c = timed(meter, lambda: asyncio.run(concurrent(server.url, args.tokens)))
                base_eight, other_d = timed(meter, lambda: base.run(PROMPTS, args.tokens))
                ratios["1 request"].append(server_one / base_one)
                ratios["8 concurrent"].append(server_eight / base_eight)
                other = max(other_a, other_b, other_c, other_d)
                print(
                    f"round {round_no}: 1 request {server_one:.1f} vs {base_one:.1f} tokens/s "
                    f"({server_one / base_one:.2f}x); 8 concurrent {server_eight:.1f} vs {base_eight:.1f} "
                    f"({server_eight / base_eight:.2f}x); other load up to {other:.2f} cores"
                )
        finally:
            server.stop()
    for name, values in ratios.items():
        each = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name}: median ratio {statistics.median(values):.2f}x (rounds: {each})")


if __name__ == "__main__":
    main()
