"""The GPU check's driver (scripts/gpu-check.sh runs it with the bundle on the path; nothing is downloaded):

1. builds full-size architectures of the catalog's main shapes with random weights (a MiniLM-L6 and a BERT-base
   embedder, a MiniLM cross-encoder, a GLiNER-medium extractor, a Qwen3-0.6B generator) from their configs;
2. compares each family in its GPU precision (float16, bfloat16) with the same weights in float32;
3. serves them from one ``sie-server`` on the GPU under a budget that holds four of the five: four resident at once,
   the pool's charges against ``torch.cuda.mem_get_info``, LRU eviction with no request failed, the served
   embedder against float32, PP-OCRv6 beside them when the bundle carries it;
4. measures encode throughput against in-process sentence-transformers (one large request; 64 clients) and
   generation tokens/s (one stream; 8) against transformers' ``generate``, same card, weights and precision.

One JSON and one Markdown table go to ``--out``; the table is printed last. ``--cpu`` runs every step on the CPU at
small sizes (the dry run that proves the bundle complete: tests/deploy/test_gpu_dry_run.py).

    python -m benchmarks.gpu_check --out DIR [--cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import _gpu_serving as serving
from benchmarks import _gpu_speed as speed
from benchmarks._gpu_catalog import budget_for, load_config, ocr_available, predicted_charge, write_catalog
from benchmarks._gpu_models import LLM, MINILM, SPECS, build_all
from benchmarks._gpu_precision import compare, reference_vectors
from benchmarks._gpu_report import Check, Machine, Report, markdown, parse_query, ratio
from benchmarks._gpu_server import device_used_bytes, serve
from benchmarks.corpus import build_corpus

#: the driver starts no step after this many seconds, so its results are written before the script's limit
RUN_S = {"cuda": 300.0, "cpu": 900.0}
STARTED = time.monotonic()
#: called after every step, so a run cut short by its limit still leaves its results (set by ``main``)
SAVE: list[Callable[[Report], None]] = []
Step = Callable[[], tuple[bool | None, str] | tuple[bool | None, str, dict[str, Any]]]
NOTES = (
    "SGLang cannot be carried to the GPU machine (its wheels and CUDA kernels are gigabytes; the machine has no "
    "network): generation ran on the torch backend, and SGLang stays unrun.",
    "Speech to text does not fit the transfer: faster-whisper's CTranslate2 (~40 MB) and PyAV (~35 MB) wheels and "
    "the tiny.en weights (75 MB) are over the 64 MiB the GPU machine receives with the tree; not run.",
)


def timed(report: Report, name: str, step: Step, limit_s: float) -> dict[str, Any]:
    """Run one step, record its verdict, time and figures, print them; a failure is recorded, not raised."""
    started = time.monotonic()
    if started - STARTED > limit_s:
        report.checks.append(Check(name, None, f"not run: the check's {limit_s:.0f} s were spent"))
        print(f"[gpu_check] {name}: not run (out of time)", flush=True)
        return {}
    figures: dict[str, Any] = {}
    try:
        answer = step()
        ok, detail = answer[0], answer[1]
        if len(answer) == 3:
            figures = answer[2]  # type: ignore[misc]
    except Exception as exc:  # every step's failure is a result to report, not the end of the run
        ok, detail = False, f"{type(exc).__name__}: {str(exc)[-400:]}"
    check = Check(name, ok, detail, time.monotonic() - started)
    report.checks.append(check)
    report.figures[name] = {"seconds": round(check.seconds, 1), **figures}
    verdict = "not run" if ok is None else ("ok" if ok else "FAIL")
    print(f"[gpu_check] {name}: {verdict} ({check.seconds:.1f}s) {detail}", flush=True)
    for save in SAVE:
        save(report)
    return figures


def machine(device: str) -> Machine:
    import torch
    import transformers

    from benchmarks._common import cpu_flags, cpu_model

    python = platform.python_version()
    if device == "cpu":
        return Machine(
            f"{cpu_model()} ({cpu_flags()})", "none", torch.__version__, "none", transformers.__version__, python
        )
    props = torch.cuda.get_device_properties(0)
    driver = "unknown"
    try:
        query = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        driver = parse_query(query)[1]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        pass
    name = f"{props.name} ({props.total_memory // 2**20} MiB, {props.multi_processor_count} SMs)"
    return Machine(name, driver, torch.__version__, str(torch.version.cuda), transformers.__version__, python)


def run(out: Path, cpu: bool) -> Report:
    device = "cpu" if cpu else "cuda"
    limit = RUN_S[device]
    plan = speed.CPU_PLAN if cpu else speed.GPU_PLAN
    report = Report(machine(device), "cpu dry run" if cpu else "gpu")
    report.notes += NOTES
    work = Path(tempfile.mkdtemp(prefix="sie-gpu-check-"))
    built: dict[str, Path] = {}

    def build() -> tuple[bool, str]:
        built.update(build_all(work / "models", small=cpu, device=device))
        sizes = {m.split("/")[-1]: _params(folder, cpu) for m, folder in built.items()}
        return True, ", ".join(f"{name} {count / 1e6:.1f}M" for name, count in sizes.items())

    timed(report, "build the models (random weights)", build, limit)
    if len(built) != len(SPECS):
        return report
    catalog = work / "catalog"
    ids = write_catalog(catalog, built, small=cpu)
    configs = {model_id: load_config(catalog, model_id) for model_id in ids}
    for spec in SPECS:
        dtype = configs[spec.model_id].profile("cuda").dtype
        name = f"{spec.family} {spec.model_id.split('/')[-1]}: {dtype} vs float32"
        timed(report, name, lambda s=spec: _outcome(compare(s, configs[s.model_id], device)), limit)
    texts = build_corpus(plan.corpus)
    reference = reference_vectors(configs[MINILM], device, texts[:64])
    kind = "cpu" if cpu else "cuda"
    charges = [predicted_charge(configs[m], kind) for m in ids]
    budget = budget_for(charges)
    report.figures["predicted_charges_mib"] = {m: round(c / 2**20) for m, c in zip(ids, charges, strict=True)}
    baseline = device_used_bytes(device)  # the GPU in use before the server: this process's context and others'
    rates: dict[str, float] = {}
    try:
        with serve(catalog, device, budget, out / "server.log") as (server, client):
            pid = server.proc.pid
            if cpu:
                baseline = device_used_bytes(device, pid)  # the server's own resident set at start
            sampler = serving.Sampler(server.url, device, baseline, pid)
            sampler.start()
            timed(report, "four models resident at once", lambda: serving.four_resident(client, ids), limit)
            timed(
                report,
                "pool charges vs device memory in use",
                lambda: serving.charges_vs_device(client, device, baseline, pid),
                limit,
            )
            timed(
                report,
                "LRU eviction, budget below the five's sum",
                lambda: serving.lru(client, ids, budget, sampler),
                limit,
            )
            sampler.stop()
            timed(
                report,
                f"served {MINILM.split('/')[-1]} vs float32",
                lambda: serving.served_embedder(client, MINILM, texts[:64], reference),
                limit,
            )
            timed(report, "encode through the server", lambda: _sie_encode(server.url, texts, plan, rates), limit)
            timed(report, "generate through the server", lambda: _sie_generate(server.url, plan, rates), limit)
            if ocr_available():
                timed(report, "OCR (PP-OCRv6) beside the GPU models", lambda: serving.ocr(client), limit)
            else:
                report.checks.append(Check("OCR (PP-OCRv6) beside the GPU models", None, "rapidocr is not installed"))
    except Exception as exc:  # the server did not start: a result to report
        report.checks.append(Check("server", False, f"{type(exc).__name__}: {str(exc)[-400:]}"))
    timed(report, "encode vs sentence-transformers", lambda: _st_encode(built, texts, device, plan, rates), limit)
    timed(report, "generate vs transformers generate", lambda: _hf_generate(built, device, plan, rates), limit)
    report.figures["rates"] = {k: round(v, 1) for k, v in rates.items()}
    return report


def _outcome(outcome: Any) -> tuple[bool, str, dict[str, Any]]:
    return outcome.ok, outcome.detail, {"figure": outcome.figure}


def _params(folder: Path, small: bool) -> int:
    """Parameters saved in ``folder``: from safetensors headers, else a pickled file's bytes over the precision it
    was saved in (float16 at full size, float32 in the dry run)."""
    from sie_server.memory.estimate import weights_bytes

    if any(folder.glob("*.safetensors")):
        return weights_bytes(folder, "float32") // 4
    return sum(p.stat().st_size for p in folder.glob("*.bin")) // (4 if small else 2)


def _sie_encode(url: str, texts: list[str], plan: speed.Plan, rates: dict[str, float]) -> tuple[bool, str]:
    rates["sie_large"] = speed.sie_large_request(url, MINILM, texts)
    rates["sie_clients"], client_cores = speed.sie_clients(url, MINILM, texts, plan.clients, plan.seconds)
    detail = (
        f"one request of {len(texts)} texts: {rates['sie_large']:,.0f} texts/s; {plan.clients} clients, one text "
        f"each: {rates['sie_clients']:,.0f} texts/s (the client process used {client_cores:.2f} cores)"
    )
    return True, detail


def _sie_generate(url: str, plan: speed.Plan, rates: dict[str, float]) -> tuple[bool, str]:
    rates["sie_gen_1"] = speed.sie_generate(url, LLM, 1, plan.new_tokens)
    rates["sie_gen_n"] = speed.sie_generate(url, LLM, plan.streams, plan.new_tokens)
    detail = (
        f"{LLM.split('/')[-1]} on the torch backend, {plan.new_tokens} new tokens: one stream "
        f"{rates['sie_gen_1']:,.0f} tokens/s, {plan.streams} streams {rates['sie_gen_n']:,.0f} tokens/s"
    )
    return True, detail


def _st_encode(
    built: dict[str, Path], texts: list[str], device: str, plan: speed.Plan, rates: dict[str, float]
) -> tuple[bool, str, dict[str, Any]]:
    dtype = "float32" if device == "cpu" else "float16"
    tried = {b: speed.st_rate(built[MINILM], texts, device, dtype, b) for b in plan.st_batches}
    best = max(tried, key=lambda b: tried[b])
    rates["st"] = tried[best]
    large, clients = ratio(rates.get("sie_large"), rates["st"]), ratio(rates.get("sie_clients"), rates["st"])
    shown = ", ".join(f"batch {b}: {r:,.0f}" for b, r in tried.items())
    detail = (
        f"sentence-transformers {dtype} in-process texts/s ({shown}); SIE / its best: one request "
        f"{_x(large)}, {plan.clients} clients {_x(clients)}"
    )
    return True, detail, {"large_ratio": large, "clients_ratio": clients}


def _hf_generate(
    built: dict[str, Path], device: str, plan: speed.Plan, rates: dict[str, float]
) -> tuple[bool, str, dict[str, Any]]:
    dtype = "float32" if device == "cpu" else "bfloat16"
    rates["hf_gen_1"], step_1 = speed.hf_generate(built[LLM], device, dtype, 1, plan.new_tokens)
    rates["hf_gen_n"], step_n = speed.hf_generate(built[LLM], device, dtype, plan.streams, plan.new_tokens)
    one, many = ratio(rates.get("sie_gen_1"), rates["hf_gen_1"]), ratio(rates.get("sie_gen_n"), rates["hf_gen_n"])
    detail = (
        f"transformers generate {dtype}: one stream {rates['hf_gen_1']:,.0f} tokens/s, {plan.streams} in one batch "
        f"{rates['hf_gen_n']:,.0f}; SIE / generate: {_x(one)} and {_x(many)}; one decode step's forward alone "
        f"{step_1:.1f} ms (1 row), {step_n:.1f} ms ({plan.streams} rows)"
    )
    return True, detail, {"one_stream_ratio": one, "streams_ratio": many, "step_ms": [step_1, step_n]}


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def commit() -> str:
    try:
        return subprocess.run(  # "-dirty": the tree had changes beyond that commit (a copied working tree)
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("gpu-check-results"))
    parser.add_argument("--cpu", action="store_true", help="every step on the CPU at small sizes (the dry run)")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args.out.mkdir(parents=True, exist_ok=True)
    tree = commit() or "unknown"
    SAVE.append(lambda report: save(report, args.out, tree))
    report = run(args.out, args.cpu)
    print(save(report, args.out, tree), flush=True)
    sys.exit(0 if report.passed else 1)


def save(report: Report, out: Path, tree: str) -> str:
    """gpu-check.json and gpu-check.md in ``out``; returns the Markdown."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    summary = markdown(report, when, tree)
    results = {"when": when, "commit": tree, **report.as_json(), "markdown": summary}
    (out / "gpu-check.json").write_text(json.dumps(results, indent=1, default=str))
    (out / "gpu-check.md").write_text(summary)
    return summary


if __name__ == "__main__":
    main()
