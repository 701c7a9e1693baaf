"""The catalog schema, the shipped configs, and picking up new files while running."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import yaml

from sie_server.catalog.loader import Catalog, CatalogError, canonical_id, parse_config_file
from tests.helpers.catalog import REAL_CATALOG, tiny_embedder, write_config
from tests.helpers.wait import wait_until

REQUIRED_IDS = {
    "sentence-transformers/all-MiniLM-L6-v2",
    "BAAI/bge-small-en-v1.5",
    "intfloat/e5-small-v2",
    "intfloat/multilingual-e5-small",
    "cross-encoder/ms-marco-MiniLM-L-6-v2",
    "BAAI/bge-reranker-base",
}


def test_shipped_catalog_is_valid_and_pinned() -> None:
    catalog = Catalog(REAL_CATALOG)
    assert catalog.errors == {}
    configs = {c.id: c for c in catalog.list()}
    assert set(configs) >= REQUIRED_IDS
    for config in configs.values():
        assert "cpu" in config.profiles
        if config.source.hf:
            assert config.source.revision and len(config.source.revision) == 40
    e5 = configs["intfloat/e5-small-v2"]
    assert (e5.runtime.query_prefix, e5.runtime.doc_prefix) == ("query: ", "passage: ")


def _write(tmp_path: Path, data: dict[str, object]) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_unknown_keys_are_refused(tmp_path: Path) -> None:
    data = tiny_embedder("a/b", tmp_path)
    data["colour"] = "blue"
    with pytest.raises(CatalogError, match="colour: Extra inputs are not permitted"):
        parse_config_file(_write(tmp_path, data))


def test_hub_source_needs_a_pinned_sha(tmp_path: Path) -> None:
    data = tiny_embedder("a/b", tmp_path)
    data["source"] = {"hf": "a/b", "revision": "main"}
    with pytest.raises(CatalogError, match="pinned revision"):
        parse_config_file(_write(tmp_path, data))


def test_cpu_profile_required(tmp_path: Path) -> None:
    data = tiny_embedder("a/b", tmp_path)
    data["profiles"] = {"cuda": {"dtype": "float16"}}
    with pytest.raises(CatalogError, match="cpu"):
        parse_config_file(_write(tmp_path, data))


def test_broken_yaml_is_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("id: [unclosed")
    write_config(tmp_path, tiny_embedder("a/good", tmp_path))
    catalog = Catalog(tmp_path)
    assert [c.id for c in catalog.list()] == ["a/good"]
    assert "not valid YAML" in next(iter(catalog.errors.values()))


def test_served_subset_and_aliases(tmp_path: Path) -> None:
    write_config(tmp_path, tiny_embedder("a/one", tmp_path))
    write_config(tmp_path, tiny_embedder("a/two", tmp_path))
    catalog = Catalog(tmp_path, served={"a__one"})
    assert [c.id for c in catalog.list()] == ["a/one"]
    assert catalog.get("a__one") is not None and catalog.get("a/two") is None
    assert canonical_id("org__name") == "org/name" and canonical_id("org/na__me") == "org/na__me"
    assert catalog.suggest("a/onee") == "a/one"


def test_running_server_serves_a_yaml_dropped_into_its_folder(
    base_url: str, catalog_dir: Path, tiny_models: dict[str, Path]
) -> None:
    model_id = f"test/added-{int(time.time() * 1000)}"
    url = f"{base_url}/v1/encode/{model_id}"
    assert httpx.post(url, json={"items": [{"text": "x"}]}).status_code == 404
    path = write_config(catalog_dir, tiny_embedder(model_id, tiny_models["embedder"]))
    try:

        def served() -> httpx.Response | None:
            answer = httpx.post(url, json={"items": [{"text": "x"}]}, timeout=60)
            return answer if answer.status_code == 200 else None

        # the server rescans its catalog folder: the new model is served soon
        r = wait_until(served, interval=0.3, message=f"{model_id} was never served after its config was written")
        assert len(r.json()["items"][0]["dense"]["values"]) == 32
    finally:
        path.unlink()
