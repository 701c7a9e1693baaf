"""Tiny random-weight open-vocabulary detectors (OWLv2, Grounding DINO) built locally, for tests.

Each builder writes a folder the adapter loads: the model's config and weights (one or two layers,
small towers), the PIL image processor's config (small input sizes) and a WordPiece tokenizer over
the test vocabulary. Grounding DINO's modelling code finds phrase boundaries by bert-base-uncased's
ids ([CLS] 101, [SEP] 102, "." 1012, "?" 1029), so its tokenizer puts those tokens at those ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sie_server.catalog.schema import ModelConfig
from tests.helpers.tiny_models import vocabulary

#: words the detector tests ask for, beside the test vocabulary's
WORDS = ("cat", "dog", "car", "red", "person")
DETECTORS = frozenset({"owlv2", "grounding-dino"})
#: Grounding DINO's hard-coded special token ids (modeling_grounding_dino.SPECIAL_TOKENS) and BERT's others
BERT_IDS = {0: "[PAD]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]", 1012: ".", 1029: "?"}
OWL_IMAGE = 32  # px, 8 px patches: 16 boxes per picture
DINO_QUERIES = 12


def build_detector(model_type: str, hidden: int, max_positions: int, folder: Path) -> Path:
    """The catalog's tiny model: OWLv2 with a vision tower of width ``hidden``, or Grounding DINO with ``d_model``."""
    if model_type == "owlv2":
        return build_owlv2(folder, vision_hidden=hidden, max_positions=max_positions)
    return build_grounding_dino(folder, d_model=hidden, max_text_len=max_positions)


def _save_tokenizer(folder: Path, vocab: list[str], names: list[str], max_length: int) -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    fast_class: Any = PreTrainedTokenizerFast  # untyped

    ids = {token: index for index, token in enumerate(vocab)}
    tokenizer = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])]
    )
    fast = fast_class(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_input_names=names,
        model_max_length=max_length,
    )
    fast.save_pretrained(folder)
    return fast


def build_owlv2(folder: Path, vision_hidden: int = 32, max_positions: int = 16, seed: int = 0) -> Path:
    """A one-layer OWLv2: 32 px pictures in 8 px patches (16 boxes, each near its patch), a 32-wide text tower."""
    import torch
    import transformers

    tf: Any = transformers  # untyped
    folder.mkdir(parents=True, exist_ok=True)
    vocab = list(dict.fromkeys([*vocabulary(), *WORDS]))
    tokenizer = _save_tokenizer(folder, vocab, ["input_ids", "attention_mask"], max_positions)
    tower = {"num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 64}
    text = tower | {"vocab_size": len(vocab), "hidden_size": 32, "max_position_embeddings": max_positions}
    text |= {"bos_token_id": tokenizer.cls_token_id, "eos_token_id": tokenizer.sep_token_id, "pad_token_id": 0}
    vision = tower | {"hidden_size": vision_hidden, "image_size": OWL_IMAGE, "patch_size": 8}
    torch.manual_seed(seed)
    config = tf.Owlv2Config(text_config=text, vision_config=vision, projection_dim=32)
    model = tf.Owlv2ForObjectDetection(config).eval()
    with torch.no_grad():  # random box heads saturate the sigmoid; small ones leave each box near its patch
        model.box_head.dense2.weight.mul_(1e-3)
        model.box_head.dense2.bias.zero_()
    model.save_pretrained(folder)
    tf.Owlv2ImageProcessorPil(size={"height": OWL_IMAGE, "width": OWL_IMAGE}).save_pretrained(folder)
    return folder


def dino_vocabulary() -> list[str]:
    """The test vocabulary with BERT's special tokens (and "." and "?") at bert-base-uncased's ids."""
    vocab = [f"[unused{i}]" for i in range(max(BERT_IDS) + 1)]
    for index, token in BERT_IDS.items():
        vocab[index] = token
    free = (i for i in range(len(vocab)) if i not in BERT_IDS)
    words = [t for t in dict.fromkeys([*vocabulary(), *WORDS]) if t not in BERT_IDS.values()]
    for index, token in zip(free, words, strict=False):
        vocab[index] = token
    return vocab


def build_grounding_dino(folder: Path, d_model: int = 64, max_text_len: int = 256, seed: int = 0) -> Path:
    """A small Grounding DINO (``d_model`` at least 64: its group norms take 32 groups, and the last feature
    level of a small picture is one pixel): a tiny Swin backbone, a one-layer BERT, one encoder and two decoder layers
    (transformers ties the decoder's box heads to the first one's and refuses a single layer), 12 queries,
    pictures resized to 64 px on the short side and at most 96 px on the long one."""
    import torch
    import transformers

    tf: Any = transformers  # untyped
    folder.mkdir(parents=True, exist_ok=True)
    vocab = dino_vocabulary()
    _save_tokenizer(folder, vocab, ["input_ids", "token_type_ids", "attention_mask"], max_text_len)
    text = tf.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=max(512, max_text_len),
    )
    stages = ["stage2", "stage3", "stage4"]  # three feature levels; the fourth is a strided conv on the last
    swin = tf.SwinConfig(
        image_size=64, patch_size=4, embed_dim=8, depths=[1] * 4, num_heads=[1] * 4, window_size=4, out_features=stages
    )
    heads = 8 if d_model % 8 == 0 else 4
    config = tf.GroundingDinoConfig(
        backbone_config=swin,
        text_config=text,
        d_model=d_model,
        encoder_layers=1,
        decoder_layers=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_n_points=2,
        decoder_n_points=2,
        num_queries=DINO_QUERIES,
        max_text_len=max_text_len,
    )
    torch.manual_seed(seed)
    tf.GroundingDinoForObjectDetection(config).eval().save_pretrained(folder)
    tf.GroundingDinoImageProcessorPil(size={"shortest_edge": 64, "longest_edge": 96}).save_pretrained(folder)
    return folder


def check_detector(adapter: Any, config: ModelConfig) -> None:
    """The catalog check: a batch of two pictures, every candidate kept, boxes inside each picture."""
    from PIL import Image

    from sie_server.adapters.runtime.media import Picture, picture_tokens
    from sie_server.adapters.runtime.options import MediaOptions

    pictures = [Picture(Image.new("RGB", (48, 48), (200, 30, 30)), page=1), Picture(Image.new("RGB", (40, 24), "blue"))]
    keep_all = {name: 0.0 for name in adapter.option_names}
    found = adapter.run([picture_tokens(p) for p in pictures], MediaOptions.of(["cat", "a red car"], None, keep_all))
    assert len(found) == 2 and found[0].objects, config.id
    for picture, answer in zip(pictures, found, strict=True):
        width, height = picture.size
        for obj in answer.objects:
            x, y, w, h = obj["bbox"]
            assert obj["label"] in ("cat", "a red car") and 0.0 <= obj["score"] <= 1.0 and obj["page"] == picture.page
            assert x >= 0 and y >= 0 and w > 0 and h > 0 and x + w <= width and y + h <= height, (config.id, obj)
