"""A real nats-server with JetStream on loopback, a gateway process and worker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.catalog import OCR, copy_real, tiny_embedder, tiny_llm, write_config
from tests.helpers.cluster import Nats

FAULTS = "tests.helpers.fault_adapters"


@pytest.fixture(scope="module")
def cluster_catalog(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("cluster-catalog")
    write_config(folder, tiny_embedder("test/tiny-embedder", tiny_models["embedder"]))
    write_config(folder, {**tiny_embedder("test/slow", tiny_models["embedder"]), "adapter": f"{FAULTS}:SlowEmbedding"})
    write_config(
        folder, {**tiny_embedder("test/crash", tiny_models["embedder"]), "adapter": f"{FAULTS}:CrashingEmbedding"}
    )
    write_config(folder, {**tiny_llm("test/endless", tiny_models["llm"]), "adapter": f"{FAULTS}:EndlessSlowLM"})
    write_config(folder, {**tiny_embedder("test/slow-load", tiny_models["embedder"]), "adapter": f"{FAULTS}:SlowLoad"})
    copy_real(folder, OCR)
    return folder


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[Nats]:
    server = Nats(tmp_path / "jetstream")
    yield server
    server.stop()
