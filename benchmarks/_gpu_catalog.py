"""The GPU check's catalog: one YAML per built model, each a copy of the shipped entry whose shape it has (tasks,
runtime, profiles) pointed at the local folder; the charge the pool will put on each (the server's own estimate);
and a budget that holds any four of the five but not all five, so loading the fifth evicts the least recently used."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import yaml

from benchmarks._gpu_models import SPECS
from tests.helpers.catalog import OCR, real_config, write_config

#: the dry run's cpu profile for every built model: float32 and no CPU precision gate (small models, short
#: batches); a reserve that covers what a small model's first load adds to the process beyond its weights
#: (imported libraries, tokenizers), which the pool counts against the budget on CPU
SMALL_CPU_PROFILE = {"dtype": "float32", "max_batch_tokens": 4096, "activation_reserve_bytes": 256 * 2**20}


def ocr_available() -> bool:
    """Whether PP-OCRv6 can run here: the rapidocr wheel (its weights inside) travels in the bundle."""
    return importlib.util.find_spec("rapidocr") is not None


def write_catalog(folder: Path, built: dict[str, Path], *, small: bool) -> list[str]:
    """A catalog folder with the built models (and PP-OCRv6 when it is installed); returns the built models' ids
    in load order."""
    folder.mkdir(parents=True, exist_ok=True)
    for spec in SPECS:
        data = real_config(spec.catalog_id)
        data["id"] = spec.model_id
        data["description"] = f"random weights in the shape of {spec.catalog_id} (GPU check)"
        data["source"] = {"path": str(built[spec.model_id])}
        if small:
            data["profiles"]["cpu"] = dict(SMALL_CPU_PROFILE)
        write_config(folder, data)
    if ocr_available():
        write_config(folder, real_config(OCR))
    return [spec.model_id for spec in SPECS]


def load_config(folder: Path, model_id: str) -> Any:
    from sie_server.catalog.schema import ModelConfig

    path = folder / (model_id.replace("/", "__") + ".yaml")
    return ModelConfig.model_validate(yaml.safe_load(path.read_text()))


def predicted_charge(config: Any, device_kind: str) -> int:
    """Weights plus activation reserve, as the pool estimates them before a load (memory/load_cost.py ``load_cost``)."""
    from sie_server.memory.estimate import activation_reserve, weights_bytes

    profile = config.profile(device_kind)
    folder = Path(config.source.path)
    reserve = profile.activation_reserve_bytes
    if reserve is None:
        reserve = activation_reserve(folder, profile.max_batch_tokens, config.max_sequence_length, profile.dtype)
    if config.tasks.generate is not None:
        reserve += profile.prefix_cache_bytes
    return int(weights_bytes(folder, profile.dtype) + reserve)


def budget_for(charges: list[int]) -> int:
    """Below the sum of all charges by half the smallest: any ``len - 1`` models fit (with room to spare for
    what the allocator holds beyond them), all of them never do."""
    if len(charges) < 2:
        raise ValueError("eviction needs at least two models")
    return sum(charges) - (min(charges) + 1) // 2
