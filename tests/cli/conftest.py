"""One real server for the terminal commands (bench, top): a tiny embedder, a tiny reranker, a model
whose load waits for a gate, and one whose weights are missing."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.catalog import tiny_cross_encoder, tiny_embedder, write_config
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_models import build_bert_embedder, build_cross_encoder

EMBEDDER = "test/cli-embedder"
RERANKER = "test/cli-reranker"
GATED = "test/cli-gated"
MISSING = "test/cli-missing"


@dataclass
class CliServer:
    proc: ServerProcess
    gate: Path  # write OPEN here to let the gated model finish loading

    @property
    def url(self) -> str:
        return self.proc.url


@pytest.fixture(scope="session")
def cli_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliServer]:
    root = tmp_path_factory.mktemp("cli-server")
    weights = build_bert_embedder(root / "embedder")
    gate = root / "gated"
    shutil.copytree(weights, gate)
    catalog = root / "catalog"
    catalog.mkdir()
    write_config(catalog, tiny_embedder(EMBEDDER, weights))
    write_config(catalog, tiny_cross_encoder(RERANKER, build_cross_encoder(root / "reranker")))
    write_config(catalog, {**tiny_embedder(GATED, gate), "adapter": "tests.helpers.gated_load:GatedLoad"})
    write_config(catalog, tiny_embedder(MISSING, root / "no-such-folder"))
    proc = ServerProcess(catalog, "--offline", "--threads", "1", env={"HF_HOME": str(root / "hf")}, log=root / "log")
    try:
        yield CliServer(proc.wait_ready(), gate)
    finally:
        (gate / "OPEN").touch()  # a load still waiting must not hold the server's stop
        proc.stop()
