"""``sie-server models pull`` against a local fake of the hub's file API (tests/helpers/fake_hub.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.catalog import CPU_PROFILE, tiny_embedder, write_config
from tests.helpers.fake_hub import FakeHub
from tests.helpers.server import ServerProcess, free_port, pythonpath
from tests.helpers.tiny_models import build_bert_embedder

REPO_ID = "test-org/tiny-pull"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def hub_config(model_id: str, repo: str) -> dict[str, object]:
    config = tiny_embedder(model_id, Path("unused"))
    config["source"] = {"hf": repo, "revision": COMMIT}
    config["profiles"] = CPU_PROFILE
    return config


def sie(catalog: Path, hf_home: Path, endpoint: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_HOME": str(hf_home), "HF_ENDPOINT": endpoint, "PYTHONPATH": pythonpath(), "COLUMNS": "120"})
    command = [sys.executable, "-m", "sie_server.cli", "models", *args, "--models-dir", str(catalog)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def two_files(tmp_path: Path) -> Path:
    folder = tmp_path / "remote"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert", "hidden_size": 32}')
    (folder / "model.safetensors").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    return folder


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    folder = tmp_path / "catalog"
    folder.mkdir()
    write_config(folder, hub_config("test/pulled", REPO_ID))
    return folder


@pytest.fixture
def hub(two_files: Path) -> Iterator[FakeHub]:
    fake = FakeHub(REPO_ID, two_files, COMMIT)
    yield fake
    fake.stop()


def snapshot(hf_home: Path) -> Path:
    return hf_home / "hub" / ("models--" + REPO_ID.replace("/", "--")) / "snapshots" / COMMIT


def test_pull_puts_both_files_in_the_cache_and_the_model_resolves_offline(
    hub: FakeHub, two_files: Path, catalog: Path, tmp_path: Path
) -> None:
    hf_home = tmp_path / "hf"
    before = sie(catalog, hf_home, hub.url, "list")
    assert "test/pulled" in before.stdout and " no " in before.stdout.splitlines()[1]

    done = sie(catalog, hf_home, hub.url, "pull", "test/pulled")

    assert done.returncode == 0, done.stderr
    for name in ("config.json", "model.safetensors"):
        assert (snapshot(hf_home) / name).read_bytes() == (two_files / name).read_bytes()
    assert f"works offline: hf-cache {snapshot(hf_home)}" in done.stdout
    assert "verified 2 files" in done.stdout
    listed = sie(catalog, hf_home, "http://127.0.0.1:9", "list")  # no hub needed to list
    row = next(line for line in listed.stdout.splitlines() if line.startswith("test/pulled"))
    assert "hf-cache" in row and " yes " in row and "3.0 MB" in row


def test_an_interrupted_pull_continues_where_it_stopped(two_files: Path, catalog: Path, tmp_path: Path) -> None:
    hf_home = tmp_path / "hf"
    fake = FakeHub(REPO_ID, two_files, COMMIT, cut_once=("model.safetensors",))
    try:
        broken = sie(catalog, hf_home, fake.url, "pull", "test/pulled")
        assert broken.returncode == 1
        assert fake.cut == ["model.safetensors"]
        lines = broken.stderr.strip().splitlines()
        assert len(lines) == 1 and "run the same command again" in lines[0], broken.stderr

        again = sie(catalog, hf_home, fake.url, "pull", "test/pulled")

        assert again.returncode == 0, again.stderr
    finally:
        fake.stop()
    resumed = [r for name, r in fake.ranges if name == "model.safetensors" and r]
    assert len(resumed) == 1 and int(resumed[0].removeprefix("bytes=").rstrip("-")) > 0  # continued, not restarted
    assert (snapshot(hf_home) / "model.safetensors").read_bytes() == (two_files / "model.safetensors").read_bytes()


def test_no_network_is_one_line_and_exit_1(catalog: Path, tmp_path: Path) -> None:
    done = sie(catalog, tmp_path / "hf", f"http://127.0.0.1:{free_port()}", "pull", "test/pulled")

    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot list test-org/tiny-pull" in done.stderr and "Traceback" not in done.stderr


def test_a_pulled_model_serves_with_the_network_off(tmp_path: Path) -> None:
    remote = build_bert_embedder(tmp_path / "remote-embedder")
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    write_config(catalog, hub_config("test/pulled-embedder", "test-org/embedder"))
    hf_home = tmp_path / "hf"
    fake = FakeHub("test-org/embedder", remote, COMMIT)
    try:
        assert sie(catalog, hf_home, fake.url, "pull", "test/pulled-embedder").returncode == 0
    finally:
        fake.stop()
    proc = ServerProcess(catalog, "--offline", "--threads", "1", env={"HF_HOME": str(hf_home)}, log=tmp_path / "log")
    try:
        proc.wait_ready()
        answer = httpx.post(f"{proc.url}/v1/encode/test/pulled-embedder", json={"items": [{"text": "hi"}]}, timeout=60)
    finally:
        proc.stop()
    assert answer.status_code == 200, answer.text
    assert answer.json()["items"][0]["dense"]["dims"] == 32


def test_a_gguf_profile_pulls_only_its_gguf_file(tmp_path: Path) -> None:
    remote = tmp_path / "remote-gguf"
    remote.mkdir()
    (remote / "model.Q4_1.gguf").write_bytes(os.urandom(200_000))
    (remote / "model.Q8_0.gguf").write_bytes(os.urandom(300_000))
    (remote / "config.json").write_text("{}")
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    gguf = {"gguf_hf": "test-org/gguf", "gguf_file": "model.Q4_1.gguf", "gguf_revision": COMMIT}
    write_config(
        catalog,
        {
            "id": "test/gguf",
            "source": gguf,
            "adapter": "causal_lm",
            "tasks": {"generate": {}},
            "max_sequence_length": 512,
            "profiles": {"cpu": {"dtype": "float32", "max_batch_tokens": 512, "backend": "llamacpp"}},
        },
    )
    hf_home = tmp_path / "hf"
    fake = FakeHub("test-org/gguf", remote, COMMIT)
    try:
        done = sie(catalog, hf_home, fake.url, "pull", "test/gguf")
    finally:
        fake.stop()

    assert done.returncode == 0, done.stderr
    assert [name for name, _ in fake.ranges] == ["model.Q4_1.gguf"]
    folder = hf_home / "hub" / "models--test-org--gguf" / "snapshots" / COMMIT
    assert sorted(p.name for p in folder.iterdir()) == ["model.Q4_1.gguf"]
    assert (folder / "model.Q4_1.gguf").read_bytes() == (remote / "model.Q4_1.gguf").read_bytes()
    assert "works offline: hf-cache" in done.stdout
