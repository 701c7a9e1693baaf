"""A catalog for the status tests: a plain embedder, a slow-loading one, one whose load fails
until a READY file appears beside its weights, and a tiny generator."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers.catalog import tiny_embedder, tiny_llm, write_config
from tests.helpers.tiny_models import build_bert_embedder, build_tiny_llm

FAULTS = "tests.helpers.fault_adapters"
EMBEDDER = "test/status-embedder"
SLOW = "test/status-slow"
FLAKY = "test/status-flaky"
LLM = "test/status-llm"
ADMIN_KEY = "root-key"
API_KEY = "user-key"


def status_catalog(root: Path) -> tuple[Path, Path]:
    """The catalog folder and the flaky model's weights folder (write READY there to mend it)."""
    weights = build_bert_embedder(root / "bert")
    flaky = root / "flaky-weights"
    shutil.copytree(weights, flaky)
    folder = root / "catalog"
    folder.mkdir()
    write_config(folder, tiny_embedder(EMBEDDER, weights))
    write_config(folder, {**tiny_embedder(SLOW, weights), "adapter": f"{FAULTS}:SlowLoad"})
    write_config(folder, {**tiny_embedder(FLAKY, flaky), "adapter": f"{FAULTS}:FlakyLoad"})
    write_config(folder, tiny_llm(LLM, build_tiny_llm(root / "llm")))
    return folder, flaky
