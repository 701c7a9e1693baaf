"""Tiny random ColPali (PaliGemma) and ColQwen2 (Qwen2-VL) retrievers with their processors, for tests.

The text side has the declared width and one layer; the vision towers are a few pixels wide: ColPali
sees 32 px pages as 4 x 4 = 16 patch tokens, ColQwen2 resizes a page to 56-112 px (4 to 16 tokens after
its 2 x 2 merge, aspect ratio kept). Both project to ``dim`` per token, as the real ones do (128).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.tiny_models import vocabulary

HEADS = 4
FFN = 64
KINDS = frozenset({"colpali", "colqwen2"})
QWEN_SPECIALS = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|endoftext|>"]


def build_colvision(kind: str, hidden: int, dim: int, folder: Path) -> Path:
    """Write a loadable tiny ``kind`` retriever (model, tokenizer, processor) into ``folder``."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    if kind == "colpali":
        return _colpali(hidden, dim, folder)
    if kind == "colqwen2":
        return _colqwen2(hidden, dim, folder)
    raise ValueError(f"no tiny ColVision builder for {kind!r}")


def _tokenizer(folder: Path) -> Any:
    """A WordPiece tokenizer over the test vocabulary with [CLS] as BOS and [SEP] as EOS."""
    from tests.helpers.tiny_architectures import save_tokenizer

    fast = save_tokenizer(folder, [*vocabulary(), "[unused0]", "[unused1]"], "colvision")
    fast.add_special_tokens({"bos_token": "[CLS]", "eos_token": "[SEP]"})
    return fast


def _text_config(fast: Any, hidden: int, vocab_size: int, **extra: Any) -> dict[str, Any]:
    return {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "intermediate_size": FFN,
        "max_position_embeddings": 2048,
        "pad_token_id": fast.pad_token_id,
        "bos_token_id": fast.cls_token_id,
        "eos_token_id": fast.sep_token_id,
        **extra,
    }


def _colpali(hidden: int, dim: int, folder: Path) -> Path:
    import transformers as tf

    fast = _tokenizer(folder)
    images = tf.SiglipImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    images.image_seq_length = 16  # (32 / 8) ** 2 patches
    processor = tf.ColPaliProcessor(image_processor=images, tokenizer=fast)  # adds <image> and PaliGemma's tokens
    text = _text_config(fast, hidden, len(processor.tokenizer), num_key_value_heads=1, head_dim=hidden // HEADS)
    vision = {"hidden_size": 32, "intermediate_size": FFN, "num_hidden_layers": 1, "num_attention_heads": HEADS}
    vision |= {"image_size": 32, "patch_size": 8, "projection_dim": hidden}
    vlm = tf.PaliGemmaConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=processor.image_token_id,
        projection_dim=hidden,
        hidden_size=hidden,
    )
    tf.ColPaliForRetrieval(tf.ColPaliConfig(vlm_config=vlm, embedding_dim=dim)).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def _colqwen2(hidden: int, dim: int, folder: Path) -> Path:
    import transformers as tf

    fast = _tokenizer(folder)
    fast.add_special_tokens({"additional_special_tokens": QWEN_SPECIALS})
    half = hidden // HEADS // 2  # rotary frequencies per head, split over (time, height, width)
    sections = [half - 2 * (half // 3), half // 3, half // 3]
    text = _text_config(
        fast, hidden, len(fast), num_key_value_heads=2, rope_scaling={"type": "mrope", "mrope_section": sections}
    )
    vision = {"depth": 1, "embed_dim": 32, "hidden_size": hidden, "num_heads": HEADS, "mlp_ratio": 2}
    vision |= {"patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
    ids = {token: fast.convert_tokens_to_ids(token) for token in QWEN_SPECIALS}
    vlm = tf.Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    tf.ColQwen2ForRetrieval(tf.ColQwen2Config(vlm_config=vlm, embedding_dim=dim)).eval().save_pretrained(folder)
    images = tf.Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=112 * 112)
    tf.ColQwen2Processor(image_processor=images, tokenizer=fast).save_pretrained(folder)
    return folder
