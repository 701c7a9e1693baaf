"""Constrained decoding's cost: tokens/s of JSON-schema-constrained generation vs free generation on the
same prompts, 1 and 8 streams, on both backends (the packaged SmolLM2 Q4_1 GGUF on llama.cpp, and the same
model dequantized on the transformers path), and the compile time of a 50-field schema.

    .venv/bin/python -m benchmarks.constrained [--threads 2] [--rounds 3] [--streams 8]

Both set-ups run on one server, in alternating rounds (free, then constrained, per backend and stream
count), greedy. Tokens/s is completion tokens over each request's whole time (prompt included), summed
over the streams for 8 streams. Free requests ask for as many new tokens as the constrained answer of the
same prompt took, so both sides decode the same counts. Goal: constrained >= 0.9x free. The compile time is
measured in this process with llguidance on SmolLM2's GGUF vocabulary: grammar check plus a matcher's start.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks._common import cpu_flags_line, machine_line
from benchmarks.generate_cpu import PROMPTS, torch_catalog
from benchmarks.generate_llamacpp import gguf_path
from tests.helpers.catalog import SMOLLM, copy_real
from tests.helpers.server import ServerProcess

RAW = argparse.RawDescriptionHelpFormatter
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "maxLength": 24},
        "kind": {"enum": ["question", "request", "note"]},
        "words": {"type": "integer", "minimum": 1, "maximum": 99},
        "keywords": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 12}},
        "polite": {"type": "boolean"},
    },
    "required": ["topic", "kind", "words", "keywords", "polite"],
    "additionalProperties": False,
}


def body(prompt: str, tokens: int, constrained: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messages": [{"role": "user", "content": prompt}],
        "max_new_tokens": tokens,
        "temperature": 0,
    }
    if constrained:
        out["grammar"] = {"json_schema": SCHEMA}
    return out


async def run(
    url: str, model: str, prompts: list[str], tokens: list[int], constrained: bool
) -> tuple[float, list[int]]:
    """Aggregate tokens/s of the prompts at once, and each answer's completion tokens."""
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:

        async def one(prompt: str, count: int) -> tuple[float, int]:
            started = time.perf_counter()
            r = await client.post(f"/v1/generate/{model}", json=body(prompt, count, constrained))
            r.raise_for_status()
            return time.perf_counter() - started, int(r.json()["usage"]["completion_tokens"])

        started = time.perf_counter()
        done = await asyncio.gather(*(one(p, n) for p, n in zip(prompts, tokens, strict=True)))
        wall = time.perf_counter() - started
    return sum(n for _, n in done) / wall, [n for _, n in done]


def compile_ms(fields: int = 50, repeats: int = 5) -> float:
    import llama_cpp as llama
    import llguidance.llamacpp

    from sie_server.engine.grammar import Constraint, GrammarSpec, check_grammar

    llama.llama_backend_init()
    params = llama.llama_model_default_params()
    params.vocab_only = True
    model = llama.llama_model_load_from_file(str(gguf_path()).encode(), params)
    vocab = llama.llama_model_get_vocab(model)
    tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(vocab, n_vocab=int(llama.llama_vocab_n_tokens(vocab)))
    kinds = [{"type": "string", "maxLength": 32}, {"type": "integer", "minimum": 0}, {"enum": ["a", "b", "c"]},
             {"type": "array", "items": {"type": "number"}}, {"type": "boolean"}]  # fmt: skip
    schema = {"type": "object", "properties": {f"field_{k}": kinds[k % len(kinds)] for k in range(fields)},
              "required": [f"field_{k}" for k in range(fields)], "additionalProperties": False}  # fmt: skip
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        Constraint(tokenizer, check_grammar(GrammarSpec.json_schema(schema), tokenizer), tokenizer.vocab_size)
        times.append((time.perf_counter() - started) * 1000)
    llama.llama_model_free(model)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RAW)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", type=int, default=8)
    args = parser.parse_args()
    print(machine_line(args.threads))
    print(cpu_flags_line())
    print(f"50-field schema: check + matcher start {compile_ms():.1f} ms (median of 5)")
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Path(tmp) / "catalog"
        catalog.mkdir()
        copy_real(catalog, SMOLLM)
        torch_id = torch_catalog(catalog)
        server = ServerProcess(catalog, "--offline", "--threads", str(args.threads), "--preload", SMOLLM,
                               "--preload", torch_id, log=Path(tmp) / "server.log")  # fmt: skip
        server.wait_ready()
        try:
            for backend, model in (("llama.cpp", SMOLLM), ("transformers", torch_id)):
                for streams in (1, args.streams):
                    prompts = PROMPTS[:streams]
                    _, counts = asyncio.run(run(server.url, model, prompts, [200] * streams, True))  # warm, and counts
                    ratios = []
                    for round_ in range(args.rounds):
                        free, _ = asyncio.run(run(server.url, model, prompts, counts, False))
                        tied, _ = asyncio.run(run(server.url, model, prompts, [200] * streams, True))
                        ratios.append(tied / free)
                        print(f"{backend}, {streams} stream(s), round {round_ + 1}: free {free:.1f} tokens/s, "
                              f"constrained {tied:.1f} ({tied / free:.3f}x)", flush=True)  # fmt: skip
                    median = statistics.median(ratios)
                    verdict = "met" if median >= 0.9 else "missed"
                    print(f"== {backend}, {streams} stream(s): median constrained / free {median:.3f}x "
                          f"(goal >= 0.9x: {verdict})", flush=True)  # fmt: skip
        finally:
            server.stop()


if __name__ == "__main__":
    main()
