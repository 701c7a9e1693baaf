"""Unit level: CPU feature detection, the cpu_precision schema field and flag, and the precision gate
run in-process on the tiny random BERT embedder (CPU features passed in, so every path runs on any
x86 CPU whatever flags it has)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from sie_server.adapters.encoders.embedding import EmbeddingAdapter
from sie_server.adapters.runtime import precision
from sie_server.adapters.runtime.precision import (
    PROBE_TEXTS,
    PrecisionPolicy,
    apply_cpu_precision,
    cosines,
    fixed_report,
)
from sie_server.catalog.schema import ModelConfig
from sie_server.cli import build_parser, main
from sie_server.cpu_features import CpuFeatures, detect, features_from_flags, parse_cpuinfo
from sie_server.memory.pool import ModelPool
from sie_server.observability.metrics import Metrics
from tests.helpers.catalog import tiny_cross_encoder, tiny_embedder
from tests.helpers.fault_adapters import PERTURBED_COSINE, PerturbedInt8Embedding

AVX2_ONLY = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma f16c"
SAPPHIRE = AVX2_ONLY + " avx512f avx512bw avx512_vnni avx512_bf16 amx_bf16 amx_int8 amx_tile"
EVERYTHING = features_from_flags(SAPPHIRE.split())
NOTHING = features_from_flags(AVX2_ONLY.split())
TEXTS = ["hello world", "invoice total due by march", "the cafeteria serves lunch " * 6]


def cpuinfo(flags: str, model: str = "Test CPU @ 2.0GHz") -> str:
    block = f"processor\t: 0\nmodel name\t: {model}\nflags\t\t: {flags}\n"
    return block + "\n" + block.replace("processor\t: 0", "processor\t: 1")


# ----- CPU features --------------------------------------------------------------------------------


def test_a_cpu_without_the_flags_runs_fp32_only_and_says_what_is_missing() -> None:
    features = parse_cpuinfo(cpuinfo(AVX2_ONLY))
    assert features.precisions == ("fp32",)
    assert features.flags == ("avx2",)
    assert features.model == "Test CPU @ 2.0GHz"
    assert not features.supports("bf16") and not features.supports("int8")
    assert features.missing("bf16") == "the CPU has none of avx512_bf16, amx_bf16"
    assert features.missing("int8") == "the CPU has none of avx512_vnni, avx_vnni"
    assert features.missing("fp32") == ""


@pytest.mark.parametrize(
    ("extra", "precisions"),
    [
        ("avx512_bf16", ("bf16", "fp32")),
        ("amx_bf16", ("bf16", "fp32")),
        ("avx512_vnni", ("int8", "fp32")),
        ("avx_vnni", ("int8", "fp32")),
        ("avx512_vnni avx512_bf16", ("int8", "bf16", "fp32")),
    ],
)
def test_each_flag_enables_its_precision(extra: str, precisions: tuple[str, ...]) -> None:
    assert parse_cpuinfo(cpuinfo(f"{AVX2_ONLY} {extra}")).precisions == precisions


def test_unreadable_cpuinfo_means_fp32(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("sie_server.cpu_features.CPUINFO", tmp_path / "no-such-file")
    detect.cache_clear()
    try:
        assert detect().precisions == ("fp32",)
    finally:
        detect.cache_clear()


def test_detect_reads_this_machine_once() -> None:
    found = detect()
    assert found is detect()
    assert found.precisions[-1] == "fp32"
    flags = set(parse_cpuinfo(Path("/proc/cpuinfo").read_text()).flags) if Path("/proc/cpuinfo").exists() else set()
    assert set(found.flags) == flags
    assert found.as_dict() == {
        "model": found.model,
        "features": list(found.flags),
        "precisions": list(found.precisions),
    }


# ----- schema and flag -----------------------------------------------------------------------------


def _config(data: dict[str, Any]) -> ModelConfig:
    return ModelConfig.model_validate(data)


def _with_cpu(data: dict[str, Any], **cpu: Any) -> dict[str, Any]:
    return {**data, "profiles": {"cpu": {"dtype": "float32", **cpu}}}


def test_profiles_default_to_fp32_only(tmp_path: Path) -> None:
    assert _config(tiny_embedder("a/b", tmp_path)).profile("cpu").cpu_precision == ["fp32"]
    gated = _config(_with_cpu(tiny_embedder("a/b", tmp_path), cpu_precision=["int8", "bf16", "fp32"]))
    assert gated.profile("cpu").cpu_precision == ["int8", "bf16", "fp32"]


@pytest.mark.parametrize(
    ("cpu", "message"),
    [
        ({"cpu_precision": ["bf16", "bf16"]}, "twice"),
        ({"cpu_precision": ["fp16"]}, "cpu_precision"),
        ({"cpu_precision": []}, "cpu_precision"),
        ({"cpu_precision": ["bf16"], "dtype": "bfloat16"}, "keeps dtype: float32"),
    ],
)
def test_bad_cpu_precision_lists_are_refused(tmp_path: Path, cpu: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _config(_with_cpu(tiny_embedder("a/b", tmp_path), **cpu))


def test_cpu_precision_is_for_embedding_models_on_the_cpu_profile(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="embedding models only, not cross_encoder"):
        _config(_with_cpu(tiny_cross_encoder("a/b", tmp_path), cpu_precision=["int8", "fp32"]))
    cuda = tiny_embedder("a/b", tmp_path)
    cuda["profiles"] = {"cpu": {}, "cuda": {"dtype": "float32", "cpu_precision": ["bf16"]}}
    with pytest.raises(ValueError, match="belongs to the cpu profile"):
        _config(cuda)
    custom = {**_with_cpu(tiny_embedder("a/b", tmp_path), cpu_precision=["int8"]), "adapter": "pkg.mod:Cls"}
    assert _config(custom).profile("cpu").cpu_precision == ["int8"]


def test_the_flag_and_its_variable(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert build_parser().parse_args(["serve", "--cpu-precision", "bf16,fp32"]).cpu_precision == "bf16,fp32"
    monkeypatch.setenv("SIE_CPU_PRECISION", "fp32")
    assert build_parser().parse_args(["serve"]).cpu_precision == "fp32"
    assert main(["serve", "--cpu-precision", "fp16,fp32"]) == 2
    assert "--cpu-precision: unknown fp16" in capsys.readouterr().err


def test_the_flag_replaces_every_cpu_profiles_list(tmp_path: Path) -> None:
    gated = _config(_with_cpu(tiny_embedder("a/b", tmp_path), cpu_precision=["int8", "bf16", "fp32"]))
    plain = _config(tiny_embedder("c/d", tmp_path))

    def pool(kind: str, override: list[Any] | None) -> ModelPool:
        return ModelPool(kind, kind, offline=True, budget_bytes=2**30, metrics=Metrics(), cpu_precision=override)

    assert pool("cpu", None).profile(gated).cpu_precision == ["int8", "bf16", "fp32"]
    assert pool("cpu", ["fp32"]).profile(gated).cpu_precision == ["fp32"]
    assert pool("cpu", ["bf16", "fp32"]).profile(plain).cpu_precision == ["bf16", "fp32"]
    assert pool("cuda", ["bf16", "fp32"]).profile(plain).cpu_precision == ["fp32"]  # cuda profiles untouched


# ----- the gate ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_config(tiny_models: dict[str, Path]) -> ModelConfig:
    return _config(tiny_embedder("test/tiny-embedder", tiny_models["embedder"]))


def load(config: ModelConfig, cls: type[EmbeddingAdapter] = EmbeddingAdapter) -> EmbeddingAdapter:
    adapter = cls(config, config.profile("cpu"), "cpu")  # profile [fp32]: load runs no gate
    adapter.load(Path(config.source.path or ""))
    assert adapter.precision == "fp32"
    return adapter


def vectors(adapter: EmbeddingAdapter) -> np.ndarray:
    return adapter.probe_vectors(TEXTS)


@pytest.fixture(scope="module")
def fp32_vectors(tiny_config: ModelConfig) -> np.ndarray:
    return vectors(load(tiny_config))


def test_a_cpu_without_the_flags_keeps_fp32_without_probing(tiny_config: ModelConfig) -> None:
    adapter = load(tiny_config)
    model = adapter.model
    probes: list[int] = []
    original = adapter.probe_vectors

    def counted(texts: Any) -> np.ndarray:
        probes.append(len(texts))
        return original(texts)

    adapter.probe_vectors = counted  # type: ignore[method-assign]
    report = PrecisionPolicy(["int8", "bf16", "fp32"], NOTHING).choose(adapter)
    assert report.running == "fp32" and adapter.model is model and adapter.precision == "fp32"
    assert [t.outcome for t in report.trials] == ["unsupported", "unsupported"]
    assert "int8 not supported: the CPU has none of avx512_vnni, avx_vnni" in report.reason
    assert "bf16 not supported: the CPU has none of avx512_bf16, amx_bf16" in report.reason
    assert probes == []


def test_int8_that_passes_the_gate_runs_quantized(tiny_config: ModelConfig, fp32_vectors: np.ndarray) -> None:
    import torch

    adapter = load(tiny_config)
    fp32_bytes = adapter.resident_bytes()
    report = PrecisionPolicy(["int8", "bf16", "fp32"], EVERYTHING).choose(adapter)
    assert report.running == "int8" and adapter.precision == "int8"
    (trial,) = report.trials
    assert trial.outcome == "chosen" and trial.threshold == 0.99
    assert trial.min_cosine is not None and trial.mean_cosine is not None
    assert 0.99 <= trial.min_cosine <= trial.mean_cosine <= 1.0 + 1e-9
    assert f"min cosine {trial.min_cosine:.4f}" in report.reason
    assert not any(isinstance(m, torch.nn.Linear) for m in adapter.model.encoder.modules())
    assert 0 < adapter.resident_bytes() < fp32_bytes  # packed int8 weights are counted, and smaller
    assert cosines(fp32_vectors, vectors(adapter)).min() >= 0.99
    assert vectors(adapter).dtype == np.float32


def test_bf16_that_passes_the_gate_returns_float32(tiny_config: ModelConfig, fp32_vectors: np.ndarray) -> None:
    import torch

    adapter = load(tiny_config)
    fp32_bytes = adapter.resident_bytes()
    report = PrecisionPolicy(["bf16", "fp32"], EVERYTHING).choose(adapter)
    assert report.running == "bf16" and report.trials[0].threshold == 0.999
    assert next(adapter.model.parameters()).dtype == torch.bfloat16
    assert adapter.resident_bytes() < 0.55 * fp32_bytes  # weights halved (integer buffers stay)
    got = vectors(adapter)
    assert got.dtype == np.float32
    assert cosines(fp32_vectors, got).min() >= 0.999
    np.testing.assert_allclose(got, fp32_vectors, atol=0.02)


def test_int8_refused_by_the_gate_falls_back_to_the_next(tiny_config: ModelConfig, fp32_vectors: np.ndarray) -> None:
    adapter = load(tiny_config, PerturbedInt8Embedding)
    report = PrecisionPolicy(["int8", "bf16", "fp32"], EVERYTHING).choose(adapter)
    refused, chosen = report.trials
    assert refused.outcome == "refused" and refused.min_cosine is not None
    assert refused.min_cosine < 0.99
    assert refused.min_cosine == pytest.approx(PERTURBED_COSINE, abs=0.005)
    assert f"int8 refused by the gate: min cosine {refused.min_cosine:.4f}" in report.reason
    assert chosen.outcome == "chosen" and report.running == adapter.precision == "bf16"
    assert cosines(fp32_vectors, vectors(adapter)).min() >= 0.999


def test_when_nothing_passes_fp32_runs_unchanged(tiny_config: ModelConfig, fp32_vectors: np.ndarray) -> None:
    adapter = load(tiny_config, PerturbedInt8Embedding)
    model = adapter.model
    report = PrecisionPolicy(["int8"], EVERYTHING).choose(adapter)  # fp32 is the last resort even if unlisted
    assert report.running == "fp32" and adapter.model is model and adapter.precision == "fp32"
    assert report.reason.startswith("fp32: int8 refused by the gate: min cosine 0.98")
    np.testing.assert_array_equal(vectors(adapter), fp32_vectors)


def test_a_conversion_that_raises_falls_back(tiny_config: ModelConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(model: Any, target: str) -> Any:
        raise RuntimeError("no quantized engine")

    monkeypatch.setattr(precision, "convert", broken)
    adapter = load(tiny_config)
    report = PrecisionPolicy(["int8", "fp32"], EVERYTHING).choose(adapter)
    assert report.running == "fp32" and report.trials[0].outcome == "failed"
    assert "int8 failed to run: RuntimeError: no quantized engine" in report.reason


def test_fp32_first_in_the_list_runs_no_gate(tiny_config: ModelConfig) -> None:
    adapter = load(tiny_config)
    report = PrecisionPolicy(["fp32", "int8"], EVERYTHING).choose(adapter)
    assert (report.running, report.trials, report.reason) == ("fp32", (), "fp32: first in the allowed list")


def test_load_applies_the_profiles_list(tiny_config: ModelConfig) -> None:
    profile = tiny_config.profile("cpu").model_copy(update={"cpu_precision": ["bf16", "fp32"]})
    adapter = EmbeddingAdapter(tiny_config, profile, "cpu")
    adapter.load(Path(tiny_config.source.path or ""))
    report = adapter.precision_report
    assert report is not None and report.allowed == ("bf16", "fp32")
    if detect().supports("bf16"):
        assert report.running == adapter.precision == "bf16"
    else:
        assert report.running == adapter.precision == "fp32"
        assert "bf16 not supported" in report.reason


def test_cuda_profiles_and_other_families_are_not_gated(tiny_config: ModelConfig, tmp_path: Path) -> None:
    cuda = _config({**tiny_embedder("a/b", tmp_path), "profiles": {"cpu": {}, "cuda": {"dtype": "float16"}}})
    fake = SimpleNamespace(model=object(), device="cuda:0", profile=cuda.profile("cuda"), precision="fp32")
    report = apply_cpu_precision(fake, EVERYTHING)  # type: ignore[arg-type]
    assert (report.running, report.trials) == ("fp16", ())
    assert "cuda:0 profile's dtype" in report.reason
    reranker = _config(tiny_cross_encoder("c/d", tmp_path)).profile("cpu")
    listed = fixed_report(reranker, "cpu", ["int8", "fp32"], "cross_encoder")
    assert listed.running == "fp32" and "cross_encoder adapter has no precision gate" in listed.reason
    assert fixed_report(reranker, "cpu").reason == "fp32: first in the allowed list"


def test_the_probe_set_is_varied() -> None:
    assert len(PROBE_TEXTS) >= 12
    lengths = sorted(len(t.split()) for t in PROBE_TEXTS)
    assert lengths[0] == 1 and lengths[-1] > 150
    assert isinstance(EVERYTHING, CpuFeatures) and EVERYTHING.precisions == ("int8", "bf16", "fp32")
