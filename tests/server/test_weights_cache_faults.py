"""The converted-weights cache (a packaged GGUF dequantized once into safetensors) survives damage,
on real server processes: a truncated or corrupt file is caught by its checksum and converted again,
and the request is answered; a cache folder that cannot be written (read-only, or full: here a file
size limit on the server process makes the write fail as a full disk does) is a MODEL_LOAD_FAILED
naming it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.catalog import write_config
from tests.helpers.server import ServerProcess, pythonpath
from tests.helpers.tiny_gguf import GGUF_FILE, build_tiny_gguf_package

MODEL = "test/tiny-gguf"
PACKAGE = "sie_test_tiny_gguf"


@pytest.fixture(scope="module")
def gguf_catalog(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(catalog folder, folder to put on PYTHONPATH so the package holding the GGUF imports)."""
    packages = tmp_path_factory.mktemp("gguf-packages")
    build_tiny_gguf_package(packages, PACKAGE)
    catalog = tmp_path_factory.mktemp("gguf-catalog")
    config = {
        "id": MODEL,
        "source": {"package": PACKAGE, "package_subdir": ".", "gguf_file": GGUF_FILE},
        "adapter": "causal_lm",
        "tasks": {"generate": {}},
        "max_sequence_length": 256,
        "profiles": {"cpu": {"dtype": "float32", "max_batch_tokens": 1024}},
    }
    write_config(catalog, config)
    return catalog, packages


def serve(gguf_catalog: tuple[Path, Path], cache: Path, log: Path, max_file_bytes: int | None = None) -> ServerProcess:
    catalog, packages = gguf_catalog
    env = {"SIE_CACHE_DIR": str(cache), "PYTHONPATH": os.pathsep.join([pythonpath(), str(packages)])}
    server = ServerProcess(catalog, "--offline", "--threads", "1", env=env, log=log, max_file_bytes=max_file_bytes)
    return server.wait_ready()


def generate(server: ServerProcess) -> httpx.Response:
    body = {"prompt": "hello world", "max_new_tokens": 3, "temperature": 0}
    return httpx.post(f"{server.url}/v1/generate/{MODEL}", json=body, timeout=120)


def converted(cache: Path) -> Path:
    folders = [p for p in (cache / "gguf").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(folders) == 1, folders
    return folders[0]


@pytest.fixture(scope="module")
def warm_cache(gguf_catalog: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache the first server filled by converting the GGUF on its first request."""
    cache = tmp_path_factory.mktemp("sie-cache")
    server = serve(gguf_catalog, cache, tmp_path_factory.mktemp("logs") / "first.log")
    try:
        r = generate(server)
        assert r.status_code == 200, r.text
    finally:
        server.stop()
    manifest = json.loads((converted(cache) / "sie-manifest.json").read_text())
    assert "model.safetensors" in manifest["files"]
    return cache


def truncate(file: Path) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])


def flip_bytes(file: Path) -> None:
    """Same size, different content near the end (tensor data): only a checksum sees it."""
    data = bytearray(file.read_bytes())
    for i in range(len(data) - 64, len(data) - 32):
        data[i] ^= 0xFF
    file.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [truncate, flip_bytes], ids=["truncated", "corrupt"])
def test_a_damaged_converted_file_is_rebuilt_and_the_request_answered(
    damage: object, gguf_catalog: tuple[Path, Path], warm_cache: Path, tmp_path: Path
) -> None:
    folder = converted(warm_cache)
    weights = folder / "model.safetensors"
    good = weights.read_bytes()
    assert callable(damage)
    damage(weights)
    assert weights.read_bytes() != good
    log = tmp_path / "server.log"
    server = serve(gguf_catalog, warm_cache, log)
    try:
        r = generate(server)
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] >= 1
    finally:
        server.stop()
    assert "are broken" in log.read_text() and "converting" in log.read_text()
    assert weights.read_bytes() == good  # converted again: the same float32 weights as the first time


def _make_read_only(folder: Path) -> bool:
    """Make ``folder`` unwritable (chmod; for root, which ignores modes, the immutable flag); False if
    this machine cannot."""
    folder.chmod(0o555)
    probe = folder / "probe"
    try:
        probe.mkdir()
    except OSError:
        return True
    probe.rmdir()
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0:
        try:
            probe.mkdir()
        except OSError:
            return True
        probe.rmdir()
    return False


@pytest.fixture
def read_only_cache(tmp_path: Path) -> Iterator[Path]:
    cache = tmp_path / "ro-cache"
    cache.mkdir()
    if not _make_read_only(cache):
        pytest.skip("cannot make a folder read-only here")
    try:
        yield cache
    finally:
        if shutil.which("chattr"):
            subprocess.run(["chattr", "-i", str(cache)], capture_output=True)
        cache.chmod(0o755)


def test_a_read_only_cache_folder_is_a_load_failure_naming_the_path(
    gguf_catalog: tuple[Path, Path], read_only_cache: Path, tmp_path: Path
) -> None:
    server = serve(gguf_catalog, read_only_cache, tmp_path / "server.log")
    try:
        r = generate(server)
        assert r.status_code == 502, r.text
        detail = r.json()["detail"]
        assert detail["code"] == "MODEL_LOAD_FAILED"
        assert str(read_only_cache / "gguf") in detail["message"] and "cannot be written" in detail["message"]
        info = httpx.get(f"{server.url}/v1/models/{MODEL}", timeout=10).json()
        assert info["state"] == "failed" and str(read_only_cache) in info["last_error"]
    finally:
        server.stop()


def test_a_full_cache_is_a_load_failure_naming_the_path(gguf_catalog: tuple[Path, Path], tmp_path: Path) -> None:
    cache = tmp_path / "full-cache"
    cache.mkdir()
    # no file may grow past 64 KiB: the converted weights (hundreds of KiB) cannot be written
    server = serve(gguf_catalog, cache, tmp_path / "server.log", max_file_bytes=64 * 1024)
    try:
        r = generate(server)
        assert r.status_code == 502, r.text
        detail = r.json()["detail"]
        assert detail["code"] == "MODEL_LOAD_FAILED"
        assert str(cache / "gguf") in detail["message"] and "cannot be written" in detail["message"]
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200  # the server itself goes on
    finally:
        server.stop()
    assert not [p for p in (cache / "gguf").rglob("*.safetensors")]  # no half-written weights left to load
