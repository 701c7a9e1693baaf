"""Where weights lie on this machine without touching the network: a folder and the source it came from,
an installed package's folder, and a GGUF file (read by ``backends.py`` to choose llama.cpp, and by
``weights.py`` to resolve it)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from sie_server.catalog.schema import ModelConfig


@dataclass(frozen=True)
class WeightsLocation:
    path: Path
    source: str  # "path", "package:<name>", "hf-cache", "hub"


def package_dir(package: str, subdir: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / subdir
    return folder if folder.is_dir() else None


def gguf_offline(config: ModelConfig) -> WeightsLocation | None:
    """The folder holding ``source.gguf_file`` on this machine (path, package, then the HF cache), or None."""
    src = config.source
    if not src.gguf_file:
        return None
    if src.path:
        path = Path(src.path).expanduser()
        return WeightsLocation(path, "path") if (path / src.gguf_file).is_file() else None
    if src.package:
        folder = package_dir(src.package, src.package_subdir)
        if folder is not None and (folder / src.gguf_file).is_file():
            return WeightsLocation(folder, f"package:{src.package}")
    if src.gguf_hf:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            file = hf_hub_download(src.gguf_hf, src.gguf_file, revision=src.gguf_revision, local_files_only=True)
        except (LocalEntryNotFoundError, OSError, ValueError):
            return None
        return WeightsLocation(Path(file).parent, "hf-cache")
    return None
