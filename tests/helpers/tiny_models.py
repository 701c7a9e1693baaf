"""Tiny random-weight models built locally, so shape and plumbing tests need no download."""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

WORDS = (
    "the a an of to and in is for on with by at from invoice total due payment lunch cafeteria "
    "hello world query passage document model server test text long short acme corp"
).split()


def vocabulary() -> list[str]:
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    pieces = [f"##{c}" for c in string.ascii_lowercase + string.digits]
    return list(dict.fromkeys(special + chars + pieces + WORDS))


def _tokenizer(folder: Path):  # type: ignore[no-untyped-def]
    """A BERT-style WordPiece tokenizer over a small vocabulary, built with `tokenizers`."""
    folder.mkdir(parents=True, exist_ok=True)
    return wordpiece(vocabulary())


def wordpiece(words: list[str], *, decoder: bool = False):  # type: ignore[no-untyped-def]
    """A BERT-style WordPiece tokenizer over ``words`` (the first five: [PAD] [UNK] [CLS] [SEP] [MASK]);
    ``decoder``: decoded text joins word pieces (else decoding keeps them apart)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(words)}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    if decoder:
        tokenizer.decoder = decoders.WordPiece()
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )


def _config(max_positions: int):  # type: ignore[no-untyped-def]
    from transformers import BertConfig

    return BertConfig(
        vocab_size=len(vocabulary()),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_positions,
    )


def build_bert_embedder(folder: Path, seed: int = 0, max_positions: int = 128) -> Path:
    import torch
    from transformers import BertModel

    if (folder / "config.json").exists():
        return folder
    tokenizer = _tokenizer(folder)
    torch.manual_seed(seed)
    BertModel(_config(max_positions)).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_cross_encoder(folder: Path, seed: int = 1, max_positions: int = 128) -> Path:
    import torch
    from transformers import BertForSequenceClassification

    if (folder / "config.json").exists():
        return folder
    tokenizer = _tokenizer(folder)
    torch.manual_seed(seed)
    config = _config(max_positions)
    config.num_labels = 1
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_llm(folder: Path, seed: int = 2, max_positions: int = 512) -> Path:
    """A tiny random Llama with the test tokenizer and a chat template (gibberish, real token counts)."""
    if (folder / "config.json").exists():
        return folder
    tokenizer = _tokenizer(folder)
    tokenizer.chat_template = CHAT_TEMPLATE
    return save_tiny_llama(folder, tokenizer, special=(0, 2, 3), seed=seed, max_positions=max_positions)


CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def save_tiny_llama(
    folder: Path,
    tokenizer: Any,
    *,
    special: tuple[int, int, int],
    seed: int,
    max_positions: int = 512,
    rig: Callable[[Any], None] | None = None,
) -> Path:
    """A tiny random Llama over ``tokenizer`` (``special``: its pad, bos and eos ids), saved with it in
    ``folder``; ``rig`` may set its weights first (a model that emits a chosen text)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    pad, bos, eos = special
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    if rig is not None:
        rig(model)
    model.generation_config = GenerationConfig(bos_token_id=bos, eos_token_id=eos, pad_token_id=pad)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_splade(folder: Path, seed: int = 3) -> Path:
    """A tiny random BertForMaskedLM: a SPLADE-shaped sparse encoder over the test vocabulary."""
    import torch
    from transformers import BertForMaskedLM

    if (folder / "config.json").exists():
        return folder
    tokenizer = _tokenizer(folder)
    torch.manual_seed(seed)
    BertForMaskedLM(_config(128)).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_colbert(folder: Path, dim: int = 16, seed: int = 4) -> Path:
    """A tiny random ColBERT: a BERT backbone plus `linear.weight` (hidden -> dim) in the same safetensors."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import BertModel

    if (folder / "config.json").exists():
        return folder
    tokenizer = _tokenizer(folder)
    tokenizer.add_tokens(["[unused0]", "[unused1]"], special_tokens=True)
    config = _config(128)
    config.vocab_size = len(tokenizer)
    torch.manual_seed(seed)
    BertModel(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    weights = load_file(str(folder / "model.safetensors"))
    weights["linear.weight"] = torch.randn(dim, config.hidden_size) * 0.1
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def build_tiny_gliner(folder: Path, backbone: Path, max_len: int = 64, seed: int = 5) -> Path:
    """A tiny random GLiNER span model over the tiny BERT backbone (gliner's own save format)."""
    import torch
    from gliner import GLiNERConfig
    from gliner.model import UniEncoderSpanGLiNER

    if (folder / "gliner_config.json").exists():
        return folder
    config = GLiNERConfig(
        model_name=str(backbone), hidden_size=32, max_width=6, max_len=max_len, dropout=0.0, max_types=10
    )
    torch.manual_seed(seed)
    UniEncoderSpanGLiNER.load_from_config(config).save_pretrained(str(folder))
    return folder


def build_tiny_bge_m3(folder: Path, seed: int = 6) -> Path:
    """A tiny random BGE-M3 layout: a BERT backbone plus sparse_linear.pt and colbert_linear.pt heads."""
    import torch
    from transformers import BertModel

    if (folder / "config.json").exists():
        return folder
    tokenizer = _tokenizer(folder)
    config = _config(128)
    torch.manual_seed(seed)
    BertModel(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    hidden = config.hidden_size
    torch.save(torch.nn.Linear(hidden, 1).state_dict(), folder / "sparse_linear.pt")
    torch.save(torch.nn.Linear(hidden, hidden).state_dict(), folder / "colbert_linear.pt")
    return folder


def build_tiny_clip(folder: Path, projection: int = 16, seed: int = 7) -> Path:
    """A tiny random CLIP (32 px images, 8 px patches) with the test tokenizer and a CLIP image processor."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    if (folder / "config.json").exists():
        return folder
    tokenizer = _tokenizer(folder)
    vocab = vocabulary()
    text = {
        "vocab_size": len(vocab),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "max_position_embeddings": 77,
        "bos_token_id": vocab.index("[CLS]"),
        "eos_token_id": vocab.index("[SEP]"),
        "pad_token_id": 0,
    }
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 32,
        "patch_size": 8,
    }
    torch.manual_seed(seed)
    CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=projection)).eval().save_pretrained(
        folder
    )
    tokenizer.save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder
