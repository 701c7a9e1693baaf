"""A tiny random SigLIP2 NaFlex model (model_type siglip2) with its image processor, for tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def build_siglip2_naflex(text: dict[str, Any], vision: dict[str, Any], folder: Path) -> None:
    """Towers from ``text``/``vision``; 8 px patches, at most 16 per image (aspect ratio kept, the rest padded)."""
    import transformers as tf

    config = tf.Siglip2Config(text_config=text, vision_config=vision | {"patch_size": 8, "num_patches": 16})
    tf.Siglip2Model(config).eval().save_pretrained(folder)
    tf.Siglip2ImageProcessor(patch_size=8, max_num_patches=16).save_pretrained(folder)
