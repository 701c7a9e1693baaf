"""A family's first load runs alone (adapters/runtime/first_load.py): two first loads of different classes never
overlap, later loads of a class already imported do; and GLiNER's activation reserve comes from the backbone config
it keeps in gliner_config.json (it has no config.json; its reserve was 0, found by the GPU check)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from sie_server.adapters.runtime import first_load
from sie_server.memory.estimate import activation_reserve


class Recorder:
    """Load spans (start, end) per adapter, each load taking ``seconds``."""

    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()


def adapter_class(name: str) -> type[Any]:
    class Loads:
        def __init__(self, key: str, recorder: Recorder) -> None:
            self.key, self.recorder = key, recorder

        def load(self, weights: Path) -> None:
            started = time.monotonic()
            time.sleep(0.2)
            with self.recorder.lock:
                self.recorder.spans[self.key] = (started, time.monotonic())

    Loads.__name__ = name
    return Loads


def load_at_once(adapters: list[Any]) -> None:
    threads = [threading.Thread(target=first_load.load, args=(a, Path("."))) for a in adapters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_first_loads_of_two_families_never_overlap_and_later_loads_do() -> None:
    recorder = Recorder()
    first, second = adapter_class("FamilyA"), adapter_class("FamilyB")
    load_at_once([first("a1", recorder), second("b1", recorder)])
    assert not overlap(recorder.spans["a1"], recorder.spans["b1"])
    load_at_once([first("a2", recorder), first("a3", recorder), second("b2", recorder)])
    assert overlap(recorder.spans["a2"], recorder.spans["a3"])  # both imported: side by side
    assert overlap(recorder.spans["a2"], recorder.spans["b2"])


def test_a_failed_first_load_leaves_the_next_one_first() -> None:
    class Breaks:
        calls = 0

        def load(self, weights: Path) -> None:
            Breaks.calls += 1
            if Breaks.calls == 1:
                raise OSError("weights missing")

    with contextlib.suppress(OSError):
        first_load.load(Breaks(), Path("."))  # type: ignore[arg-type]
    assert Breaks not in first_load._imported
    first_load.load(Breaks(), Path("."))  # type: ignore[arg-type]
    assert Breaks in first_load._imported


def test_gliner_reserve_comes_from_its_backbone_config(tmp_path: Path) -> None:
    encoder = {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12}
    (tmp_path / "gliner_config.json").write_text(json.dumps({"max_len": 384, "encoder_config": encoder}))
    reserve = activation_reserve(tmp_path, 32768, 384, "float16")
    assert reserve == 32768 * (6 * 768 + 2 * 3072 + 12 * 384) * 2  # 1.0 GiB, as a BERT-base of that shape
    (tmp_path / "gliner_config.json").write_text(json.dumps({"max_len": 384, "encoder_config": None}))
    assert activation_reserve(tmp_path, 32768, 384, "float16") == 0  # an old config without one: nothing to go on
