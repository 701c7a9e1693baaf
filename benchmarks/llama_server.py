"""This server against llama.cpp's own `llama-server` on the packaged SmolLM2-135M Q4_1 GGUF, side by side.

    .venv/bin/python -m benchmarks.llama_server [--rounds 3] [--threads 2] [--tokens 128] [--wait-quiet 60]
        [--torch-prefill-tokens 256]
        [--build-only] [--sdist llama_cpp_python-0.3.36.tar.gz]

`llama-server` is built once from the llama.cpp that the installed llama-cpp-python vendors (its sdist, from
the registry through pip, or --sdist) as released, without this project's patches (patches/llama.cpp/: the
baseline is llama.cpp's own), with the wheel's choices (Release, -march=native, -DGGML_OPENMP=OFF;
static here so one file is cached), and kept under ~/.cache/sie/llama-server/cpu-<CPU_ID>/ like the
Makefile's wheel: CPU_ID is the Makefile's (cksum of /proc/cpuinfo's first flags line), so another CPU
builds its own. Both servers run at once on the same file and thread count: `sie-server serve --offline
--threads N` and `llama-server -np 8 -t N -tb N` (continuous batching, 4,096 tokens of KV per slot). Rows,
each taken on both servers in turn (the order flips every round), medians over --rounds:

1. one stream: a short prompt, --tokens new tokens (greedy), completion tokens / wall s;
2. 8 concurrent streams: the same with 8 prompts, total completion tokens / wall s;
3. a ~--long-token prompt, 1 new token: wall s to the answer, prompt tokens / that;
4. a ~--prefix-token system prompt + context asked one question (cold), then another question on the same
   context (warm): warm / cold wall s on each server (llama-server reuses its slot's cache, cache_prompt).

Every request is a non-streamed `POST /v1/completions` ({"prompt", "max_tokens", "temperature": 0}; llama-
server also gets "cache_prompt": true), timed by this client the same way on both; prompts of rows 3 and 4
are new text every round, so no cache serves a cold one; rows 1 and 2 repeat theirs, which both servers then
serve from their caches (llama-server's slots, this server's prefix cache), so they measure decoding.
Ratios: this server / llama-server (for times, this server's time / llama-server's), the median of the
per-round ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from benchmarks._common import cpu_flags, cpu_model, wait_quiet
from benchmarks.corpus import WORDS
from benchmarks.generate_cpu import PROMPTS
from benchmarks.generate_llamacpp import gguf_path
from tests.helpers.catalog import SMOLLM, copy_real
from tests.helpers.server import ServerProcess, free_port
from tests.helpers.wait import wait_until

CACHE = Path.home() / ".cache" / "sie" / "llama-server"
CMAKE_ARGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",
    "-DGGML_OPENMP=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # no download of the web UI at build time
    "-DLLAMA_OPENSSL=OFF",
)
SYSTEM = "You answer questions about the context below in one short sentence."


# ----- building llama-server -----------------------------------------------------------------------
def cpu_id() -> str:
    """The Makefile's CPU_ID: cksum of /proc/cpuinfo's first flags line (or of `uname -m`)."""
    line = "(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m) | cksum | cut -d' ' -f1"
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=True).stdout.strip()


def llama_cpp_version() -> str:
    return importlib.metadata.version("llama_cpp_python")


def cached_binary(version: str) -> Path:
    return CACHE / f"cpu-{cpu_id()}" / f"llama-cpp-python-{version}-noomp" / "llama-server"


def build(version: str, sdist: Path | None) -> tuple[Path, dict[str, Any]]:
    """The cached llama-server of this CPU and llama-cpp-python version, built first when missing."""
    binary = cached_binary(version)
    stamp = binary.with_name("build.json")
    if binary.exists() and stamp.exists():  # the stamp is written last: a killed build leaves none
        return binary, {**json.loads(stamp.read_text()), "cached": True}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="llama-server-build-") as tmp:
        work = Path(tmp)
        if sdist is None:
            download = [sys.executable, "-m", "pip", "download", f"llama-cpp-python=={version}", "--no-deps"]
            subprocess.run([*download, "--no-binary", ":all:", "-d", str(work)], check=True)
            sdist = next(work.glob("llama_cpp_python-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            tar.extractall(work, filter="data")
        source = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"))
        out = work / "build"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        configure = ["cmake", "-S", str(source), "-B", str(out), *generator, *CMAKE_ARGS]
        make = ["cmake", "--build", str(out), "--target", "llama-server", "-j", str(os.cpu_count() or 1)]
        print(f"building llama-server: {' '.join(configure)}; {' '.join(make)}", flush=True)
        subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(make, check=True, stdout=subprocess.DEVNULL)
        binary.parent.mkdir(parents=True, exist_ok=True)
        part = binary.with_name("llama-server.part")
        shutil.copy2(out / "bin" / "llama-server", part)
        part.replace(binary)
    info = {
        "llama_cpp_python": version,
        "cpu_id": cpu_id(),
        "cmake_args": list(CMAKE_ARGS),
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    stamp.write_text(json.dumps(info, indent=1))
    return binary, {**info, "cached": False}


# ----- the two servers -----------------------------------------------------------------------------
class Side(NamedTuple):
    name: str
    url: str
    model: str
    extra: dict[str, Any]  # body fields only this side gets
    command: str


def start_llama_server(
    binary: Path, threads: int, slots: int, per_slot: int, log: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """llama-server on the packaged GGUF on a free loopback port, ready; and its URL."""
    port = free_port()
    command = [str(binary), "-m", str(gguf_path()), "--host", "127.0.0.1", "--port", str(port)]
    command += ["-np", str(slots), "-t", str(threads), "-tb", str(threads), "-c", str(slots * per_slot)]
    command += ["--cont-batching", "--no-webui"]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def ready() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, timeout=300, interval=0.2, message="llama-server not ready")
    return proc, f"http://127.0.0.1:{port}"


class Answer(NamedTuple):
    seconds: float
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None  # usage.prompt_tokens_details.cached_tokens, where the server says


async def complete(client: httpx.AsyncClient, side: Side, prompt: str, tokens: int) -> Answer:
    body = {"model": side.model, "prompt": prompt, "max_tokens": tokens, "temperature": 0, **side.extra}
    started = time.perf_counter()
    answer = await client.post(f"{side.url}/v1/completions", json=body)
    seconds = time.perf_counter() - started
    answer.raise_for_status()
    usage = answer.json()["usage"]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return Answer(seconds, usage["prompt_tokens"], usage["completion_tokens"], cached)


def chat(user: str, system: str | None = None) -> str:
    """A ChatML prompt (SmolLM2's template) as raw text: both servers parse its special tokens."""
    head = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
    return f"{head}<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


class Texts:
    """Context text of a given token count (SmolLM2's tokenizer), new for every seed."""

    def __init__(self) -> None:
        import llama_cpp

        self.vocab: Any = llama_cpp.Llama(str(gguf_path()), vocab_only=True, verbose=False)

    def count(self, text: str) -> int:
        return len(self.vocab.tokenize(text.encode(), add_bos=True, special=True))

    def context(self, tokens: int, seed: int) -> str:
        """Seeded words of the benchmark corpus, as many as fit in ``tokens`` tokens."""
        rng = random.Random(seed)
        words = [rng.choice(WORDS) + ("." if rng.random() < 0.08 else "") for _ in range(2 * tokens)]
        low, high = 0, len(words)  # the most words that fit
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if self.count(" ".join(words[:mid])) <= tokens else (low, mid - 1)
        return " ".join(words[:low])


def argv(proc: subprocess.Popen[bytes]) -> str:
    args = proc.args
    return " ".join(map(str, args)) if isinstance(args, list) else str(args)


Figures = dict[str, float]  # one round's figures on one server, by name (see run_row)
ROWS = ("one", "many", "long", "prefix")


async def run_row(side: Side, row: str, prompts: dict[str, str], tokens: int, streams: int) -> Figures:
    """One row of the table on one server: its figures by name."""
    async with httpx.AsyncClient(timeout=900) as client:
        if row == "one":
            one = await complete(client, side, prompts["one"], tokens)
            return {"single": one.completion_tokens / one.seconds, "single_tokens": one.completion_tokens}
        if row == "many":
            started = time.perf_counter()
            many = await asyncio.gather(*(complete(client, side, chat(p), tokens) for p in PROMPTS[:streams]))
            return {"many": sum(a.completion_tokens for a in many) / (time.perf_counter() - started)}
        if row == "long":
            long = await complete(client, side, prompts["long"], 1)
            return {"long_s": long.seconds, "long_prompt": long.prompt_tokens}
        cold = await complete(client, side, prompts["cold"], 1)
        warm = await complete(client, side, prompts["warm"], 1)
        cached = float("nan") if warm.cached_tokens is None else warm.cached_tokens
        return {"cold_s": cold.seconds, "warm_s": warm.seconds, "prefix_prompt": warm.prompt_tokens, "cached": cached}


def round_prompts(texts: Texts, long: int, prefix: int, seed: int) -> dict[str, str]:
    """A round's prompts: new long and prefix contexts per seed, so nothing cached answers a cold request."""
    question = "Which company is named most often in the context?"
    long_context = texts.context(long - 40, seed=1000 + seed)
    shared = texts.context(prefix - 40, seed=2000 + seed)
    return {
        "one": chat(PROMPTS[0]),
        "long": chat(f"Context:\n{long_context}\n\nQuestion: {question}", SYSTEM),
        "cold": chat(f"Context:\n{shared}\n\nQuestion: {question}", SYSTEM),
        "warm": chat(f"Context:\n{shared}\n\nQuestion: Which month is named first in the context?", SYSTEM),
    }


def report(rounds: list[dict[str, Figures]], args: argparse.Namespace) -> None:
    ours, theirs = "sie-server", "llama-server"

    def med(side: str, field: str) -> float:
        return statistics.median(r[side][field] for r in rounds)

    def ratio(field: str) -> float:
        return statistics.median(r[ours][field] / r[theirs][field] for r in rounds)

    for i, r in enumerate(rounds, 1):
        for name in (ours, theirs):
            f = r[name]
            cached = "?" if math.isnan(f["cached"]) else f"{f['cached']:.0f}"
            print(
                f"  round {i} {name:<12}: 1 stream {f['single']:6.1f} tok/s ({f['single_tokens']:.0f} tokens); "
                f"{args.streams} streams {f['many']:6.1f} tok/s; {f['long_prompt']:.0f}-token prompt "
                f"{f['long_s']:5.2f} s; prefix cold {f['cold_s']:5.2f} s, warm {f['warm_s']:5.2f} s "
                f"({f['warm_s'] / f['cold_s']:.2f}x; {f['prefix_prompt']:.0f} tokens, {cached} cached)"
            )
    print(f"\n| measure (medians of {len(rounds)} rounds) | llama-server | this server | ratio (this / llama) |")
    print("|---|---|---|---|")
    print(
        f"| one stream, tokens/s ({args.tokens} new) | {med(theirs, 'single'):.1f} | {med(ours, 'single'):.1f} "
        f"| {ratio('single'):.2f}x |"
    )
    print(
        f"| {args.streams} streams, aggregate tokens/s | {med(theirs, 'many'):.1f} | {med(ours, 'many'):.1f} "
        f"| {ratio('many'):.2f}x |"
    )
    rate = {n: med(n, "long_prompt") / med(n, "long_s") for n in (ours, theirs)}
    print(
        f"| {med(ours, 'long_prompt'):.0f}-token prompt, 1 new token: s to the answer (prompt tokens/s) "
        f"| {med(theirs, 'long_s'):.2f} s ({rate[theirs]:.0f}) | {med(ours, 'long_s'):.2f} s ({rate[ours]:.0f}) "
        f"| {ratio('long_s'):.2f}x time |"
    )
    warm = {n: statistics.median(r[n]["warm_s"] / r[n]["cold_s"] for r in rounds) for n in (ours, theirs)}
    print(
        f"| second prompt sharing a ~{args.prefix}-token prefix: warm / cold time | {warm[theirs]:.2f}x "
        f"({med(theirs, 'warm_s'):.2f} / {med(theirs, 'cold_s'):.2f} s) | {warm[ours]:.2f}x "
        f"({med(ours, 'warm_s'):.2f} / {med(ours, 'cold_s'):.2f} s) | {ratio('warm_s'):.2f}x warm time |"
    )


def run_rounds(sides: list[Side], texts: Texts, args: argparse.Namespace) -> list[dict[str, Figures]]:
    """A warm-up on each server (loads sie-server's model), then the rounds: each row on both servers in
    turn, the order flipped every round."""
    warm_up = round_prompts(texts, 300, 300, seed=-1)
    for side in sides:
        for row in ROWS:
            asyncio.run(run_row(side, row, warm_up, 8, args.streams))
    rounds = []
    for i in range(args.rounds):
        print(f"round {i + 1}: {wait_quiet(args.wait_quiet)}", flush=True)
        prompts = round_prompts(texts, args.long, args.prefix, seed=i)
        figures: dict[str, Figures] = {side.name: {} for side in sides}
        for row in ROWS:
            for side in sides if i % 2 == 0 else sides[::-1]:
                time.sleep(args.settle)  # the other server's threads go idle first (llama-server's spin a while)
                figures[side.name].update(asyncio.run(run_row(side, row, prompts, args.tokens, args.streams)))
        rounds.append(figures)
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each row on both servers in turn; medians")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128, help="new tokens per stream (rows 1 and 2)")
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--slots", type=int, default=8, help="llama-server -np")
    parser.add_argument("--per-slot", type=int, default=4096, help="llama-server KV tokens per slot (-c slots*this)")
    parser.add_argument("--long", type=int, default=2000, help="prompt tokens of row 3")
    parser.add_argument("--prefix", type=int, default=1500, help="shared prefix tokens of row 4")
    parser.add_argument("--wait-quiet", type=float, default=0.0, help="wait up to S s for a quiet machine per round")
    parser.add_argument(
        "--settle", type=float, default=0.5, help="s to wait before each row on each server: llama-server's threads "
        "keep a core busy for a while after its answer, which slowed this server's next request by 50-130 ms"
    )  # fmt: skip
    parser.add_argument("--sdist", type=Path, help="a llama_cpp_python-<version>.tar.gz to build from (else pip)")
    parser.add_argument("--build-only", action="store_true", help="build (or find) the cached llama-server, exit")
    parser.add_argument(
        "--torch-prefill-tokens", type=int, help="this server reads prompts this long with torch (adapters/generators/"
        "torch_prefill.py); default: the catalog profile's (off)",
    )  # fmt: skip
    args = parser.parse_args()
    version = llama_cpp_version()
    binary, built = build(version, args.sdist)
    how = "cached" if built["cached"] else "built"
    print(f"llama-server ({how}; llama-cpp-python {version}, build {built['build_seconds']} s): {binary}")
    if args.build_only:
        return
    print(f"CPU {cpu_model()}, flags: {cpu_flags()}; nproc {os.cpu_count()}; threads {args.threads} (both)")
    texts = Texts()
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Path(tmp) / "catalog"
        catalog.mkdir()
        copy_real(catalog, SMOLLM)
        extra = [] if args.torch_prefill_tokens is None else ["--torch-prefill-tokens", str(args.torch_prefill_tokens)]
        sie = ServerProcess(catalog, "--offline", "--threads", str(args.threads), *extra, log=Path(tmp) / "sie.log")
        llama: subprocess.Popen[bytes] | None = None
        try:
            sie.wait_ready(timeout_s=600)
            llama, url = start_llama_server(binary, args.threads, args.slots, args.per_slot, Path(tmp) / "llama.log")
            sides = [
                Side("sie-server", sie.url, SMOLLM, {}, argv(sie.proc)),
                Side("llama-server", url, "smollm2", {"cache_prompt": True}, argv(llama)),
            ]
            for side in sides:
                print(f"{side.name}: {side.command}")
            rounds = run_rounds(sides, texts, args)
            info = httpx.get(f"{sie.url}/v1/models/{SMOLLM}", timeout=10).json()
            shown = ("backend", "weights_source", "precision", "gguf_format")
            print("sie-server's model:", {k: info[k] for k in shown if k in info})
        finally:
            if llama is not None:
                llama.terminate()
                try:
                    llama.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    llama.kill()
                    llama.wait()
            sie.stop()
    report(rounds, args)


if __name__ == "__main__":
    main()
