"""Turning a GGUF file that a package carries into a safetensors folder, once, cached on disk.

Loading a GGUF through transformers dequantizes it (and needs `gguf` and `accelerate`),
which takes tens of seconds; the converted folder loads in about one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def cache_root() -> Path:
    return Path(os.environ.get("SIE_CACHE_DIR") or Path.home() / ".cache" / "sie")


def converted_folder(folder: Path, gguf_file: str) -> Path:
    """The safetensors folder for ``folder/gguf_file``, converting it first if not cached."""
    source = folder / gguf_file
    stat = source.stat()
    key = hashlib.sha256(f"{source.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    target = cache_root() / "gguf" / f"{source.stem}-{key}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    log.info("converting %s to safetensors in %s (once; this takes a while)", source, target)
    staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        _convert(folder, gguf_file, staging)
        try:
            staging.rename(target)
        except OSError:  # another process finished first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _convert(folder: Path, gguf_file: str, out: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf_file)
    loader: Any = AutoModelForCausalLM
    model = loader.from_pretrained(str(folder), gguf_file=gguf_file)
    model.hf_quantizer = None  # dequantized on load: plain float weights from here on
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
