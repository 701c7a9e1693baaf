"""scripts/gpu-check.sh and the GPU check's pure parts: the script parses, shellcheck finds nothing, a machine
without an NVIDIA GPU gets one clear line and exit 2 before anything is installed, a missing bundle likewise; the
budget holds any four of five models and never all five; the comparisons catch what they must; the report's table
names the machine and every verdict. The whole check runs on CPU in tests/deploy/test_gpu_dry_run.py."""

from __future__ import annotations

import math
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks._gpu_catalog import budget_for, predicted_charge, write_catalog
from benchmarks._gpu_models import SPECS
from benchmarks._gpu_precision import min_cosine, relative_error
from benchmarks._gpu_report import Check, Machine, Report, markdown, parse_query, ratio

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu-check.sh"
NO_GPU = "no NVIDIA GPU found (nvidia-smi missing or no device): this check needs one (or --cpu)"
#: what the script calls before it knows whether there is a GPU (or a bundle)
TOOLS = ("bash", "dirname", "date", "grep", "timeout")
# read on the lent H200 (2026-12-04, scripts/gpu-check.sh's first step)
QUERY_SAMPLE = "NVIDIA H200, 580.159.04, 143771\n"
GIB = 2**30


def bin_dir(tmp_path: Path, nvidia_smi: str | None) -> Path:
    """A PATH holding only the tools the script needs first, and a fake nvidia-smi if given."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (folder / tool).symlink_to(found)
    if nvidia_smi is not None:
        fake = folder / "nvidia-smi"
        fake.write_text(f"#!{shutil.which('bash')}\n{nvidia_smi}\n")
        fake.chmod(0o755)
    return folder


def run_script(tmp_path: Path, nvidia_smi: str | None, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {
        "PATH": str(bin_dir(tmp_path, nvidia_smi)),
        "HOME": str(tmp_path),
        "SIE_GPU_BUNDLE": str(tmp_path / "bundle"),
        "SIE_GPU_SITE": str(tmp_path / "site"),
    }
    started = time.monotonic()
    done = subprocess.run(
        [shutil.which("bash") or "bash", str(SCRIPT), *args, str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, time.monotonic() - started


def test_script_parses() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_shellcheck_finds_nothing() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (Debian: apt-get install -y shellcheck; `make test` does it)")
    done = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize(
    "nvidia_smi",
    [None, 'echo "No devices were found"; exit 6', 'echo "No devices were found"'],
    ids=["no-nvidia-smi", "nvidia-smi-fails", "nvidia-smi-lists-nothing"],
)
def test_no_gpu_is_one_line_and_exit_2_before_installing(tmp_path: Path, nvidia_smi: str | None) -> None:
    done, seconds = run_script(tmp_path, nvidia_smi)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (done.stdout + done.stderr).strip().splitlines() == [NO_GPU]
    assert seconds < 10
    assert not (tmp_path / "site").exists() and not (tmp_path / "out").exists()


def test_a_missing_bundle_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done, _ = run_script(tmp_path, None, "--cpu")
    assert done.returncode == 2
    assert f"no wheels in {tmp_path / 'bundle'}: run `make gpu-bundle`" in done.stderr
    assert not (tmp_path / "site").exists() and not (tmp_path / "out").exists()


def test_nvidia_smi_sample_parses() -> None:
    assert parse_query(QUERY_SAMPLE) == ("NVIDIA H200", "580.159.04", 143771)
    assert parse_query("NVIDIA H200, 580.159.04, 143771 MiB\nNVIDIA H200, 580.159.04, 143771\n")[2] == 143771


@pytest.mark.parametrize("charges", [[600, 1300, 760, 1400, 18600], [5, 5, 5, 5, 5], [1, 1000]])
def test_the_budget_holds_any_four_of_five_and_never_all(charges: list[int]) -> None:
    budget = budget_for(charges)
    for left_out in range(len(charges)):
        rest = sum(c for i, c in enumerate(charges) if i != left_out)
        assert rest + min(charges) // 2 <= budget  # any n - 1 fit, with half the smallest to spare
    assert sum(charges) > budget
    with pytest.raises(ValueError):
        budget_for([GIB])


def test_the_catalog_serves_each_shape_under_its_shipped_config(tmp_path: Path) -> None:
    """Each built model takes its shipped entry's tasks and GPU profile; the predicted charge is the server's."""
    import json

    built = {}
    for spec in SPECS:
        folder = tmp_path / spec.model_id.split("/")[-1]
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"hidden_size": 64, "intermediate_size": 128}))
        built[spec.model_id] = folder
    ids = write_catalog(tmp_path / "catalog", built, small=False)
    assert ids == [spec.model_id for spec in SPECS]
    from benchmarks._gpu_catalog import load_config

    generator = load_config(tmp_path / "catalog", ids[-1])
    assert generator.profile("cuda").dtype == "bfloat16" and generator.source.path == str(built[ids[-1]])
    for model_id in ids[:-1]:
        assert load_config(tmp_path / "catalog", model_id).profile("cuda").dtype == "float16"
    # no weights: the charge is the reserve, which the prefix cache adds to for the generator only
    embedder = load_config(tmp_path / "catalog", ids[0])
    assert predicted_charge(embedder, "cuda") > 0
    reserve = predicted_charge(generator, "cuda")
    assert reserve > generator.profile("cuda").prefix_cache_bytes


def test_comparisons_catch_what_they_must() -> None:
    a = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]])
    assert min_cosine(a, a) == pytest.approx(1.0)
    assert 0.99 < min_cosine(np.array([[1.0, 0.001, 0.0], [0.6, 0.8, 0.05]]), a) < 0.999
    assert min_cosine(np.array([[math.nan, 0, 0], [0.6, 0.8, 0]]), a) == -math.inf  # NaN never passes
    with pytest.raises(ValueError):
        min_cosine(a, a[:1])
    assert relative_error(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0
    assert relative_error(np.array([1.01, 2.0]), np.array([1.0, 2.0])) == pytest.approx(0.01 / math.sqrt(5))
    assert relative_error(np.array([math.inf, 2.0]), np.array([1.0, 2.0])) == math.inf
    assert ratio(300.0, 200.0) == pytest.approx(1.5)
    assert ratio(300.0, 0.0) is None and ratio(None, 2.0) is None


def test_the_report_names_the_machine_and_every_verdict() -> None:
    machine = Machine("NVIDIA H200 (143155 MiB, 132 SMs)", "580.159.04", "2.11.0+cu130", "13.0", "5.17.0", "3.12.3")
    report = Report(machine, "gpu")
    report.checks += [
        Check("embedder minilm-l6: float16 vs float32", True, "min cosine 0.99999", 3.2),
        Check("OCR (PP-OCRv6) beside the GPU models", None, "rapidocr is not installed"),
    ]
    report.notes.append("SGLang stays unrun.")
    text = markdown(report, "2026-12-04 16:58 UTC", "abc1234")
    assert "on **NVIDIA H200 (143155 MiB, 132 SMs)**, driver 580.159.04, torch 2.11.0+cu130 (CUDA 13.0)" in text
    assert "| embedder minilm-l6: float16 vs float32 | pass | min cosine 0.99999 | 3.2 |" in text
    assert "| OCR (PP-OCRv6) beside the GPU models | not run | rapidocr is not installed | 0.0 |" in text
    assert "- SGLang stays unrun." in text
    assert report.passed and text.rstrip().endswith("Overall: pass.")
    report.checks.append(Check("server", False, "RuntimeError: exited\nTraceback | line 3\n" + "x" * 500))
    row = next(line for line in markdown(report, "now", "abc").splitlines() if line.startswith("| server"))
    assert row.startswith("| server | FAIL | RuntimeError: exited Traceback / line 3 xxx")
    assert row.endswith("... | 0.0 |") and len(row) < 320
    assert not report.passed and report.as_json()["passed"] is False
    assert markdown(report, "now", "abc").rstrip().endswith("Overall: FAIL.")
