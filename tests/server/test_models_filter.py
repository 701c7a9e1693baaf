"""Finding a model for a job: ``GET /v1/models?task=&output=`` on a real server, and
``sie-server models list --family/--task/--output`` on the same catalog."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.server import REPO


def listing(base_url: str, **query: str) -> httpx.Response:
    return httpx.get(f"{base_url}/v1/models", params=query, timeout=30)


def ids(answer: httpx.Response) -> set[str]:
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    found = {m["id"] for m in body["models"]}
    assert {m["id"] for m in body["data"]} == found  # OpenAI's list shows the same models
    return found


def test_task_and_output_filters_keep_the_models_that_do_both(base_url: str) -> None:
    everything = ids(listing(base_url))
    sparse = ids(listing(base_url, task="encode", output="sparse"))
    assert {"test/tiny-splade", "test/tiny-bge-m3"} <= sparse < everything
    assert "test/tiny-embedder" not in sparse and "test/tiny-colbert" not in sparse
    for model in listing(base_url, task="encode", output="sparse").json()["models"]:
        assert "encode" in model["tasks"] and "sparse" in model["outputs"]
    assert {"test/tiny-colbert", "test/tiny-bge-m3"} <= ids(listing(base_url, output="muvera"))
    assert "test/tiny-embedder" not in ids(listing(base_url, output="muvera"))
    generate = ids(listing(base_url, task="generate"))
    assert "test/tiny-llm" in generate and "test/tiny-embedder" not in generate
    assert ids(listing(base_url, task="extract", output="dense")) == set()


@pytest.mark.parametrize(
    ("query", "named"),
    [({"task": "embed"}, "encode, score, extract, generate"), ({"output": "colbert"}, "dense, sparse, multivector")],
)
def test_an_unknown_filter_value_is_a_400_naming_the_known_ones(
    base_url: str, query: dict[str, str], named: str
) -> None:
    answer = listing(base_url, **query)
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"]["code"] == "INVALID_INPUT"
    assert named in answer.json()["detail"]["message"]


def test_the_openapi_spec_documents_the_filters(base_url: str) -> None:
    operation = httpx.get(f"{base_url}/openapi.json", timeout=30).json()["paths"]["/v1/models"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"task", "output"}
    assert "400" in operation["responses"]


def models_list(catalog_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sie_server.cli", "models", "list", "--models-dir", str(catalog_dir), *flags]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120)


def test_models_list_by_family_shows_tasks_and_dims(catalog_dir: Path) -> None:
    done = models_list(catalog_dir, "--family", "--task", "encode", "--output", "multivector")
    lines = done.stdout.splitlines()
    assert lines[0] == "bge_m3" and "colbert" in lines
    colbert = next(line for line in lines if line.strip().startswith("test/tiny-colbert"))
    assert colbert.split()[1:] == ["encode,score", "multivector", "16,", "muvera", "2048"]
    assert not any("tiny-embedder" in line or "tiny-splade" in line for line in lines)


def test_models_list_filters_the_table_and_refuses_unknown_values(catalog_dir: Path) -> None:
    table = models_list(catalog_dir, "--task", "extract").stdout
    rows = [line.split()[0] for line in table.splitlines()[1:] if line.startswith("test/")]
    guards = ["test/smollm2-guard", "test/tiny-guard", "test/tiny-guard-rigged"]  # causal LMs that extract verdicts
    classifiers = ["test/tiny-gliclass", "test/tiny-nli", "test/tiny-sentiment"]
    assert rows == sorted(["test/slow-pictures", "test/tiny-gliner", "test/tiny-owlv2", *guards, *classifiers])
    refused = models_list(catalog_dir, "--output", "colbert")
    assert refused.returncode == 2 and "dense" in refused.stderr and "muvera" in refused.stderr
