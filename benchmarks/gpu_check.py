"""The GPU check's driver (scripts/gpu-check.sh runs it in its CUDA venv): one server on the GPU
serving an embedder, a reranker and SmolLM2 on SGLang under a budget that forces LRU eviction (then OCR,
detection, a zero-shot classifier and faster-whisper on the same server);
answers checked against the CPU path, throughput against sentence-transformers and bare SGLang,
GPU memory sampled with nvidia-smi, and one results file (JSON + Markdown) written.

    python -m benchmarks.gpu_check --out DIR
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from benchmarks import _gpu_catalog as cat
from benchmarks import _gpu_media as media
from benchmarks._gpu_report import (
    COSINE_FLOOR,
    GIB,
    Check,
    Gpu,
    Report,
    budget_for,
    budget_respected,
    markdown,
    min_cosine,
    parse_cuda_version,
    parse_memory_used_mib,
    parse_query,
    ratio,
    says_paris,
    top1,
)
from benchmarks.corpus import build_corpus

TEXTS = ["The cat sits on the mat.", "Paris is the capital of France.", "GPUs multiply matrices quickly."] * 4
QUERY = "What is the capital of France?"
PASSAGES = [
    "Berlin is the capital of Germany.",
    "Paris is the capital and largest city of France.",
    "Bananas are yellow.",
]
QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
MEASURE_S = 8.0
LLM_PROMPTS = [f"Write one sentence about the number {i}." for i in range(64)]
LLM_NEW_TOKENS = 64


def smi(*args: str) -> str:
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20, check=True).stdout


def gpu() -> Gpu:
    name, driver, total = parse_query(
        smi("--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits")
    )
    return Gpu(name, driver, parse_cuda_version(smi()), total)


class MemorySampler(threading.Thread):
    """nvidia-smi's memory.used every half second, labelled with the step running."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, int, str]] = []
        self.label = "idle"
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            try:
                used = parse_memory_used_mib(smi("--query-gpu=memory.used", "--format=csv,noheader,nounits"))
                self.samples.append((time.monotonic(), used, self.label))
            except (subprocess.SubprocessError, ValueError, OSError):
                pass
            self._done.wait(0.5)

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=5)

    def peak(self, labels: set[str]) -> int:
        return max((mib for _, mib, label in self.samples if label in labels), default=0)


#: the driver stops starting steps after this many seconds, so its results are written before the
#: script's own limit (280 s) ends it
RUN_S = 240.0
STARTED = time.monotonic()


def timed(report: Report, name: str, fn: Callable[[], tuple[bool | None, str]]) -> None:
    """Run one step, record its verdict and time, and print both (a failure is recorded, not raised)."""
    started = time.monotonic()
    if started - STARTED > RUN_S:
        report.checks.append(Check(name, None, f"not run: the check's {RUN_S:.0f} s were spent"))
        print(f"[gpu_check] {name}: skipped (out of time)")
        return
    try:
        ok, detail = fn()
    except Exception as exc:  # every step's failure is a result to report, not the end of the run
        ok, detail = False, f"{type(exc).__name__}: {str(exc)[-300:]}"
    check = Check(name, ok, detail, time.monotonic() - started)
    report.checks.append(check)
    print(
        f"[gpu_check] {name}: {'skipped' if ok is None else ('ok' if ok else 'FAIL')} ({check.seconds:.1f}s) {detail}"
    )


def config(model_id: str, folder: Path) -> Any:
    import yaml

    from sie_server.catalog.schema import ModelConfig

    return ModelConfig.model_validate(yaml.safe_load((folder / (model_id.replace("/", "__") + ".yaml")).read_text()))


def weights(model_id: str, folder: Path, cuda: bool = False) -> Path:
    """The folder the server loads (the same resolution; with ``cuda``, the cuda profile's)."""
    from sie_server.adapters.runtime.weights import resolve

    cfg = config(model_id, folder)
    return Path(resolve(cfg, offline=False, profile=cfg.profiles["cuda"] if cuda else None).path)


def loaded(client: httpx.Client, model_id: str) -> bool:
    return bool(client.get(f"/v1/models/{model_id}").json().get("loaded"))


def encode(client: httpx.Client, texts: list[str]) -> list[list[float]]:
    body = {"items": [{"text": t} for t in texts]}
    response = client.post(f"/v1/encode/{cat.EMBEDDER}", json=body)
    response.raise_for_status()
    return [item["dense"]["values"] for item in response.json()["items"]]


def check_embedder(client: httpx.Client, folder: Path) -> tuple[bool, str]:
    from sentence_transformers import SentenceTransformer

    cpu = SentenceTransformer(str(weights(cat.EMBEDDER, folder)), device="cpu").encode(TEXTS, normalize_embeddings=True)
    worst = min_cosine(encode(client, TEXTS), cpu.tolist())
    return worst >= COSINE_FLOOR, f"min cosine fp16 (GPU) vs fp32 (CPU) {worst:.5f} (floor {COSINE_FLOOR})"


def check_reranker(client: httpx.Client, folder: Path, model_id: str) -> tuple[bool, str]:
    from sentence_transformers import CrossEncoder

    cpu = CrossEncoder(str(weights(model_id, folder)), device="cpu").predict([(QUERY, p) for p in PASSAGES])
    body = {"query": {"text": QUERY}, "items": [{"id": str(i), "text": p} for i, p in enumerate(PASSAGES)]}
    response = client.post(f"/v1/score/{model_id}", json=body)
    response.raise_for_status()
    served = {int(s["item_id"]): s["score"] for s in response.json()["scores"]}
    ours, theirs = top1([served[i] for i in range(len(PASSAGES))]), top1([float(x) for x in cpu])
    return ours == theirs, f"top-1 GPU {ours} vs CPU {theirs} ({model_id})"


def check_llm(client: httpx.Client, backend: str) -> tuple[bool, str]:
    response = client.post(f"/v1/generate/{cat.LLM}", json={"messages": QUESTION, "max_new_tokens": 16})
    response.raise_for_status()
    text = response.json()["text"]
    return says_paris(text), f"{backend} answered {text.strip()[:60]!r}"


def check_lru(client: httpx.Client, ids: list[str]) -> tuple[bool, str]:
    """After the last model loaded, the first (least recently used) is gone; using it again evicts the next."""
    after_last = {m: loaded(client, m) for m in ids}
    encode(client, TEXTS[:1])
    after_reuse = {m: loaded(client, m) for m in ids}
    first_evicted = not after_last[ids[0]] and after_last[ids[-1]]
    next_evicted = after_reuse[ids[0]] and not after_reuse[ids[1]]
    short = {m.split("/")[-1]: v for m, v in after_reuse.items()}
    return first_evicted and next_evicted, f"loaded after last load {after_last[ids[0]]=}, after reuse {short}"


def measure(fn: Callable[[], int], seconds: float = MEASURE_S, threads: int = 8) -> float:
    """Units per second that ``threads`` callers of ``fn`` (each call returns its units) get in ``seconds``."""
    deadline = time.monotonic() + seconds
    started = time.monotonic()

    def loop() -> int:
        done = 0
        while time.monotonic() < deadline:
            done += fn()
        return done

    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(lambda _: loop(), range(threads)))
    return total / (time.monotonic() - started)


def sie_encode_rate(client: httpx.Client, corpus: list[str]) -> float:
    batches = [corpus[i : i + 32] for i in range(0, len(corpus), 32)]
    counter = iter(range(10**9))
    return measure(lambda: len(encode(client, batches[next(counter) % len(batches)])))


def st_encode_rate(folder: Path, corpus: list[str]) -> float:
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(weights(cat.EMBEDDER, folder)), device="cuda").half()
    model.encode(corpus[:256], batch_size=256)
    done, started = 0, time.monotonic()
    while time.monotonic() - started < MEASURE_S:
        done += len(model.encode(corpus, batch_size=256))
    torch.cuda.synchronize()
    return done / (time.monotonic() - started)


def sie_llm_rate(client: httpx.Client) -> float:
    def one(prompt: str) -> int:
        body = {"messages": [{"role": "user", "content": prompt}], "max_new_tokens": LLM_NEW_TOKENS}
        response = client.post(f"/v1/generate/{cat.LLM}", json=body)
        response.raise_for_status()
        return int(response.json()["usage"]["completion_tokens"])

    started = time.monotonic()
    with ThreadPoolExecutor(len(LLM_PROMPTS)) as pool:
        tokens = sum(pool.map(one, LLM_PROMPTS))
    return tokens / (time.monotonic() - started)


def bare_sglang(model_path: str) -> None:
    """Child mode: SGLang's own Engine on the same weights and prompts; prints tokens/s as JSON."""
    import sglang
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    prompts = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
        for p in LLM_PROMPTS
    ]
    engine = sglang.Engine(
        model_path=model_path, dtype="bfloat16", mem_fraction_static=0.05, context_length=8192, log_level="error"
    )
    sampling = {"max_new_tokens": LLM_NEW_TOKENS, "temperature": 0.0}
    engine.generate(prompts[:4], sampling)
    started = time.monotonic()
    outputs = engine.generate(prompts, sampling)
    seconds = time.monotonic() - started
    tokens = sum(int(o["meta_info"]["completion_tokens"]) for o in outputs)
    engine.shutdown()
    print(json.dumps({"tokens_per_s": tokens / seconds}))


def bare_sglang_rate(model_path: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_check", "--bare-sglang", str(model_path)],
        capture_output=True,
        text=True,
        timeout=max(10.0, RUN_S + 30 - (time.monotonic() - STARTED)),
        check=True,
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1])["tokens_per_s"])


def server_checks(
    report: Report,
    folder: Path,
    out: Path,
    budget: int,
    ids: list[str],
    reranker: cat.Reranker | None,
    where: str,
    backend: str,
    corpus: list[str],
    rates: dict[str, float],
) -> None:
    """The checks on one server process: answers, LRU order, SIE's own throughput."""
    from benchmarks._gpu_server import serve

    with serve(folder, budget, out / "server.log") as client:
        timed(report, "embedder fp16 vs CPU fp32", lambda: check_embedder(client, folder))
        if reranker is not None:
            timed(report, "reranker top-1 vs CPU", lambda: check_reranker(client, folder, reranker.model_id))
        else:
            report.checks.append(Check("reranker top-1 vs CPU", None, where))
        timed(report, f"LLM on {backend} says Paris", lambda: check_llm(client, backend))
        timed(report, "LRU eviction under the budget", lambda: check_lru(client, ids))
        timed(report, "OCR (PP-OCRv6) beside the GPU models", lambda: media.check_ocr(client))
        timed(report, "OWLv2 detection on CUDA in float16", lambda: media.check_detector(client))
        nli = str(folder / "tiny-nli")
        timed(report, "zero-shot labels (tiny NLI, float16) vs CPU", lambda: media.check_classifier(client, nli))
        timed(report, "faster-whisper tiny.en on CUDA", lambda: media.check_transcription(client, report.figures))

        def sie_rates() -> tuple[bool, str]:
            rates["sie_encode"] = sie_encode_rate(client, corpus)
            rates["sie_generate"] = sie_llm_rate(client)
            return True, f"encode {rates['sie_encode']:.0f} items/s, generate {rates['sie_generate']:.0f} tokens/s"

        timed(report, "SIE throughput", sie_rates)


def run(out: Path) -> Report:
    report = Report(gpu())
    sglang = importlib.util.find_spec("sglang") is not None
    backend = "sglang" if sglang else "transformers"
    if not sglang:
        report.notes.append("sglang is not installed: the LLM ran on transformers and bare SGLang was not measured")
    reranker, where = cat.find_reranker()
    report.notes.append(where)
    folder = Path(tempfile.mkdtemp(prefix="sie-gpu-check-"))
    ids = cat.write_catalog(folder, reranker, sglang)
    budget = budget_for(cat.reserves(ids), weights_allowance=int(1.5 * GIB))
    report.figures["budget_bytes"] = budget
    sampler = MemorySampler()
    sampler.start()
    deadline = time.monotonic() + 20
    while not sampler.samples and time.monotonic() < deadline:  # the idle GPU, before the server starts
        sampler.join(timeout=0.1)
    baseline = min((mib for _, mib, _ in sampler.samples), default=0)
    corpus = build_corpus(1024)
    sampler.label = "server"
    rates: dict[str, float] = {}
    try:
        server_checks(report, folder, out, budget, ids, reranker, where, backend, corpus, rates)
    except Exception as exc:  # the server did not start: a result to report
        report.checks.append(Check("server on cuda", False, f"{type(exc).__name__}: {str(exc)[-300:]}"))
    sampler.label = "baselines"
    peak = sampler.peak({"server"})

    def memory() -> tuple[bool | None, str]:
        if not peak:
            return None, "no nvidia-smi sample while the server ran"
        ok = budget_respected(peak, baseline, budget, processes=2 if sglang else 1)
        return (
            ok,
            f"peak {peak - baseline} MiB over the idle {baseline} MiB; budget {budget / 2**20:.0f} MiB + contexts",
        )

    timed(report, "GPU memory within the budget (nvidia-smi)", memory)

    def st() -> tuple[bool, str]:
        rates["st_encode"] = st_encode_rate(folder, corpus)
        return True, f"sentence-transformers fp16 on the GPU {rates['st_encode']:.0f} items/s"

    timed(report, "baseline: sentence-transformers", st)
    if sglang:

        def bare() -> tuple[bool, str]:
            rates["bare_generate"] = bare_sglang_rate(weights(cat.LLM, folder, cuda=True))
            return True, f"bare SGLang Engine {rates['bare_generate']:.0f} tokens/s"

        timed(report, "baseline: bare SGLang", bare)
    sampler.stop()
    report.figures.update({k: round(v, 1) for k, v in rates.items()})
    report.figures["encode_vs_sentence_transformers_ratio"] = ratio(
        rates.get("sie_encode", 0), rates.get("st_encode", 0)
    )
    report.figures["generate_vs_bare_sglang_ratio"] = ratio(rates.get("sie_generate", 0), rates.get("bare_generate", 0))
    report.figures["memory_samples_mib"] = [(round(t, 1), mib, label) for t, mib, label in sampler.samples]
    return report


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=cat.REPO
        ).stdout.strip()
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("gpu-check-results"))
    parser.add_argument("--bare-sglang", metavar="MODEL_PATH", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_sglang:
        bare_sglang(args.bare_sglang)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    report = run(args.out)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    summary = markdown(report, when, commit())
    results = {"when": when, "commit": commit(), **report.as_json(), "markdown": summary}
    (args.out / "gpu-check.json").write_text(json.dumps(results, indent=1))
    (args.out / "gpu-check.md").write_text(summary)  # the same summary, ready to paste
    print(summary)
    sys.exit(0 if report.passed else 1)


if __name__ == "__main__":
    main()
