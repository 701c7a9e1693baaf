"""A tiny random Florence-2 (transformers' native ``florence2`` format) with its processor, built offline.

The language model is a one-layer BART of the given width; the vision tower a two-stage DaViT
(16 and 32 channels) that sees 32 x 32 pictures as a 4 x 4 grid, so each picture is 17 image tokens
(16 and the pooled one). The tokenizer is byte-level BPE over the 256 byte symbols (no merges: every
text encodes, a character a token) plus Florence's added tokens: ``<loc_0>`` .. ``<loc_999>``, its
region and polygon markers, and ``<image>``. Ids follow BART's: ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FLORENCE2 = frozenset({"florence2"})
IMAGE_SIZE = 32
IMAGE_TOKENS = (IMAGE_SIZE // 8) ** 2 + 1  # strides 4 then 2: a 4 x 4 grid, and the pooled token
MARKERS = ("<od>", "</od>", "<ocr>", "</ocr>", "<cap>", "</cap>", "<poly>", "</poly>", "<sep>", "<and>")


def build_florence2(folder: Path, hidden: int = 32, max_positions: int = 1024, seed: int = 0) -> Path:
    """Write a loadable tiny Florence-2 into ``folder`` (returned): BART of width ``hidden``."""
    import torch
    import transformers as tf
    from tokenizers.pre_tokenizers import ByteLevel

    folder.mkdir(parents=True, exist_ok=True)
    symbols = ["<s>", "<pad>", "</s>", "<unk>", *sorted(ByteLevel.alphabet()), "<mask>"]
    tokenizer = tf.RobertaTokenizer(
        vocab={s: i for i, s in enumerate(symbols)}, merges=[], extra_special_tokens={"image_token": "<image>"}
    )
    tokenizer.add_tokens([*MARKERS, *(f"<loc_{n}>" for n in range(1000))], special_tokens=True)
    images = tf.CLIPImageProcessorPil(
        size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        do_center_crop=False,
        image_mean=[0.485, 0.456, 0.406],
        image_std=[0.229, 0.224, 0.225],
    )
    images.image_seq_length = IMAGE_TOKENS
    parsing = {"phrase_grounding": {"banned_grounding_tokens": ["the image"]}}
    processor = tf.Florence2Processor(image_processor=images, tokenizer=tokenizer, post_processor_config=parsing)
    text = {"model_type": "bart", "vocab_size": len(tokenizer), "d_model": hidden}
    text |= {"max_position_embeddings": max_positions, "dropout": 0.0}
    text |= {"encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4, "decoder_attention_heads": 4}
    text |= {"encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "bos_token_id": 0, "pad_token_id": 1, "eos_token_id": 2}
    text |= {"decoder_start_token_id": 2, "forced_eos_token_id": 2}
    vision = {"depths": [1, 1], "patch_size": [7, 3], "patch_stride": [4, 2], "patch_padding": [3, 1]}
    vision |= {"patch_prenorm": [False, True], "embed_dim": [16, 32], "num_heads": [1, 2], "num_groups": [1, 2]}
    vision |= {"window_size": 4, "projection_dim": hidden, "max_position_embeddings": 8, "drop_path_rate": 0.0}
    config = tf.Florence2Config(text_config=text, vision_config=vision, image_token_id=tokenizer.image_token_id)
    torch.manual_seed(seed)
    model = tf.Florence2ForConditionalGeneration(config).eval()
    model.generation_config = tf.GenerationConfig(
        bos_token_id=0,
        pad_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_bos_token_id=0,
        forced_eos_token_id=2,
        no_repeat_ngram_size=3,
        num_beams=3,
        early_stopping=True,
    )
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def check_florence2(adapter: Any, config: Any) -> None:
    """The catalog test's check: the declared width, and a batch of two pictures answered in order with the
    config's default task (and phrase grounding), boxes inside each picture. Random weights: a few tokens."""
    from PIL import Image

    from sie_server.adapters.runtime.media import Picture, picture_tokens
    from sie_server.adapters.runtime.options import MediaOptions

    assert adapter.model.config.text_config.d_model == config.architecture.hidden_size
    pictures = [Picture(Image.new("RGB", (48, 48), (200, 30, 30)), page=1), Picture(Image.new("RGB", (40, 24), "blue"))]
    default = config.tasks.extract.options["task"]
    for labels, task in ((None, default), (["a red square"], "<CAPTION_TO_PHRASE_GROUNDING>")):
        options = MediaOptions.of(labels, None, {"task": task, "max_new_tokens": 6})
        adapter.check(options)
        found = adapter.run([picture_tokens(p) for p in pictures], options)
        assert [f.data["task"] for f in found] == [task, task]
        for answer, picture in zip(found, pictures, strict=True):
            width, height = picture.size
            for x, y, w, h in [o["bbox"] for o in answer.objects] + [e["bbox"] for e in answer.entities if e["bbox"]]:
                assert 0 <= x <= x + w <= width and 0 <= y <= y + h <= height
