"""The GPU check's dry run: scripts/gpu-check.sh --cpu in a venv that looks like the GPU machine's image (its
packages at its versions where known, no project install; `make gpu-dry-run-deps` builds it), the bundle's pins
installed from wheels with no index, then every step of the check on the CPU at small sizes. A dependency the
server gains that the bundle lacks fails here, not on the GPU machine.

Bound of this machine: no CPU build of torch exists for Python 3.12 here (download.pytorch.org is unreachable,
PyPI's Linux wheels are CUDA builds), so the look-alike runs the project's Python 3.11 with the CPU torch on this
disk, and the wheels are the same pins built for 3.11; test_gpu_bundle.py verifies the 3.12 wheels themselves."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOOKALIKE = REPO / ".venv-gpu-lookalike" / "bin" / "python"
WHEELS = REPO / ".gpu-bundle-dry-run"
#: the whole dry run takes about 40 s on 2 cores; this bounds a hung server
LIMIT_S = 600

pytestmark = pytest.mark.skipif(
    not LOOKALIKE.exists() or not any(WHEELS.glob("*.whl")),
    reason="no GPU image look-alike venv or dry-run wheels: `make gpu-dry-run-deps` (which `make test` runs)",
)


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def test_the_lookalike_holds_only_what_the_image_has() -> None:
    """Else the dry run could pass on a package the GPU machine does not have."""
    listing = subprocess.run(
        [
            str(LOOKALIKE),
            "-I",  # isolated: the venv alone, not this checkout's sie_oss.egg-info on the working directory's path
            "-c",
            "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'] for d in m.distributions()))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
    ).stdout.split()
    image = {
        _name(line.split("==")[0])
        for line in (REPO / "scripts" / "gpu" / "image-packages.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert sorted({_name(n) for n in listing} - image) == []


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("gpu-dry-run")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "SIE_GPU_PYTHON": str(LOOKALIKE),
        "SIE_GPU_BUNDLE": str(WHEELS),
        "SIE_GPU_SITE": str(out / "site"),
        "SIE_GPU_LIMIT_S": str(LIMIT_S - 30),
    }
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu-check.sh"), "--cpu", str(out / "results")],
        env=env,
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
    )
    return done, out / "results"


def test_every_step_passes_on_the_cpu(dry_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, results = dry_run
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    report = json.loads((results / "gpu-check.json").read_text())
    assert report["mode"] == "cpu dry run" and report["passed"] is True
    verdicts = {c["name"]: c["ok"] for c in report["checks"]}
    assert all(verdicts.values()), verdicts  # every step ran (none skipped) and passed
    names = " | ".join(verdicts)
    for step in (
        "embedder minilm-l6: float16 vs float32",
        "embedder bert-base: float16 vs float32",
        "reranker cross-encoder-minilm-l6: float16 vs float32",
        "extractor gliner-medium: float16 vs float32",
        "generator qwen3-0.6b: bfloat16 vs float32",
        "four models resident at once",
        "pool charges vs device memory in use",
        "LRU eviction, budget below the five's sum",
        "encode vs sentence-transformers",
        "generate vs transformers generate",
        "OCR (PP-OCRv6) beside the GPU models",
    ):
        assert step in names
    # the table is printed last, and the same table is written beside the JSON
    assert done.stdout.rstrip().endswith("Overall: pass.")
    assert (results / "gpu-check.md").read_text() in done.stdout


def test_its_figures_are_the_ones_the_gpu_run_reports(dry_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, results = dry_run
    figures = json.loads((results / "gpu-check.json").read_text())["figures"]
    lru = figures["LRU eviction, budget below the five's sum"]
    assert lru["failed"] == 0 and lru["evictions"] >= 4 and lru["peak_used_mib"] <= lru["budget_mib"]
    memory = figures["pool charges vs device memory in use"]
    assert memory["weights_mib"] <= memory["charged_mib"]
    rates = figures["rates"]
    for name in ("sie_large", "sie_clients", "st", "sie_gen_1", "sie_gen_n", "hf_gen_1", "hf_gen_n"):
        assert rates[name] > 0, name
    assert figures["generate vs transformers generate"]["one_stream_ratio"] > 0
