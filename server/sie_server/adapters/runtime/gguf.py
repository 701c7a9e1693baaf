"""Turning a GGUF file that a package carries into a safetensors folder, once, cached on disk.

Loading a GGUF through transformers dequantizes it (and needs `gguf` and `accelerate`),
which takes tens of seconds; the converted folder loads in about one. Each converted folder
holds a manifest of its files' sizes and SHA-256 sums: a folder whose files no longer match
(truncated, corrupt, missing, or written before manifests existed) is rebuilt before use.
A cache folder that cannot be written (read-only, full) is a MODEL_LOAD_FAILED naming it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sie_server.errors import ModelLoadFailed

log = logging.getLogger(__name__)

MANIFEST = "sie-manifest.json"
_CHUNK = 2**20
T = TypeVar("T")


def cache_root() -> Path:
    return Path(os.environ.get("SIE_CACHE_DIR") or Path.home() / ".cache" / "sie")


def source_key(source: Path) -> str:
    """A cache key for a file: its path, size and modification time (a changed file gets a new key)."""
    stat = source.stat()
    return hashlib.sha256(f"{source.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]


def converted_folder(folder: Path, gguf_file: str) -> Path:
    """The safetensors folder for ``folder/gguf_file``, converting it first if not cached (or broken)."""
    source = folder / gguf_file
    target = cache_root() / "gguf" / f"{source.stem}-{source_key(source)}"

    def convert(staging: Path) -> None:
        model, tokenizer = _read(folder, gguf_file)
        _writable(lambda: _save(model, tokenizer, staging), target.parent)

    return cached_build(target, convert, f"the weights of {source.name} as safetensors")


def cached_build(target: Path, build: Callable[[Path], None], what: str) -> Path:
    """``target``, made by ``build`` into a staging folder (then a manifest of its files' sizes and SHA-256
    sums, then one rename) unless a sound one is cached; a broken one is made again."""
    if target.is_dir():
        problem = verify(target)
        if problem is None:
            return target
        log.warning("%s in %s are broken (%s); converting again", what, target, problem)
        _writable(lambda: shutil.rmtree(target), target)
    _writable(lambda: target.parent.mkdir(parents=True, exist_ok=True), target.parent)
    log.info("converting %s into %s (once; this takes a while)", what, target)
    staging = _writable(lambda: Path(tempfile.mkdtemp(prefix=".making-", dir=target.parent)), target.parent)
    try:
        build(staging)
        _writable(lambda: _write_manifest(staging), target.parent)
        try:
            staging.rename(target)
        except OSError:  # another process finished first
            if verify(target) is not None:
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def verify(target: Path) -> str | None:
    """None when every file the manifest lists has its recorded size and SHA-256; else what is wrong."""
    try:
        manifest = json.loads((target / MANIFEST).read_text())
        files: dict[str, dict[str, Any]] = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"no readable {MANIFEST}"
    for name, expected in files.items():
        path = target / name
        try:
            size = path.stat().st_size
            if size != expected["size"]:
                return f"{name} is {size} bytes, expected {expected['size']}"
            if _sha256(path) != expected["sha256"]:
                return f"{name} does not match its checksum"
        except OSError as exc:
            return f"{name}: {exc.strerror or exc}"
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _writable(step: Callable[[], T], where: Path) -> T:
    """Run a step that writes into the cache; a failure (read-only, full, no permission) names the folder."""
    try:
        result = step()
    except Exception as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
        raise ModelLoadFailed(
            f"the converted-weights cache {where} cannot be written ({reason}); "
            "free space there or set SIE_CACHE_DIR to a writable folder"
        ) from exc
    return result


def _read(folder: Path, gguf_file: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf_file)
    loader: Any = AutoModelForCausalLM
    model = loader.from_pretrained(str(folder), gguf_file=gguf_file)
    model.hf_quantizer = None  # dequantized on load: plain float weights from here on
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model, tokenizer


def _save(model: Any, tokenizer: Any, out: Path) -> None:
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


def _write_manifest(out: Path) -> None:
    files = {p.name: {"size": p.stat().st_size, "sha256": _sha256(p)} for p in sorted(out.iterdir()) if p.is_file()}
    (out / MANIFEST).write_text(json.dumps({"files": files}, indent=1))
