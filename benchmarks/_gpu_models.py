"""The GPU check's models: the catalog's main shapes at full size with random weights, built here from their
configs (no download: the GPU machine has no network, and speed does not depend on the weights' values), and the
same architectures at a small size for the CPU dry run.

Each model is saved in the precision its GPU profile runs (float16 encoders, a bfloat16 generator), so the check's
float32 reference holds the very same values upcast. Tokenizers are WordPiece over the tests' vocabulary padded
with made-up words to the architecture's vocabulary size, so every id a model can emit decodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.corpus import WORDS as CORPUS_WORDS
from tests.helpers.tiny_models import CHAT_TEMPLATE, vocabulary, wordpiece

#: words of the check's own requests (benchmarks/_gpu_serving.py, _gpu_speed.py) beyond the corpus's
EXTRA_WORDS = "ada lovelace wrote london friday who bananas yellow write short note number person place".split()

#: the check's catalog ids, each serving under a shipped catalog entry's config (tasks, runtime, profiles)
MINILM = "gpu-check/minilm-l6"
BERT_BASE = "gpu-check/bert-base"
RERANKER = "gpu-check/cross-encoder-minilm-l6"
GLINER = "gpu-check/gliner-medium"
LLM = "gpu-check/qwen3-0.6b"


@dataclass(frozen=True)
class Size:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int


@dataclass(frozen=True)
class Spec:
    model_id: str
    catalog_id: str  # the shipped config it serves under
    family: str  # embedder, reranker, extractor, generator
    full: Size  # the architecture the catalog points at
    small: Size  # the CPU dry run's


BERT_VOCAB = 30522
SPECS = (
    Spec(
        MINILM,
        "sentence-transformers/all-MiniLM-L6-v2",
        "embedder",
        Size(384, 6, 12, 1536, BERT_VOCAB),
        Size(64, 2, 4, 128, 1024),
    ),
    Spec(
        BERT_BASE, "BAAI/bge-base-en-v1.5", "embedder", Size(768, 12, 12, 3072, BERT_VOCAB), Size(96, 2, 4, 192, 1024)
    ),
    Spec(
        RERANKER,
        "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "reranker",
        Size(384, 6, 12, 1536, BERT_VOCAB),
        Size(64, 2, 4, 128, 1024),
    ),
    # GLiNER medium v2.1: a DeBERTa-v3-base backbone (128,100 words) under GLiNER's span head
    Spec(GLINER, "urchade/gliner_medium-v2.1", "extractor", Size(768, 12, 12, 3072, 128100), Size(64, 2, 4, 128, 1024)),
    # Qwen3-0.6B: 28 layers, 16 query and 8 key/value heads of 128, tied embeddings over 151,936 tokens
    Spec(LLM, "Qwen/Qwen3-0.6B", "generator", Size(1024, 28, 16, 3072, 151936), Size(64, 2, 4, 128, 1024)),
)


def tokenizer(size: int) -> Any:
    """A BERT-style WordPiece tokenizer of exactly ``size`` entries (the tests' vocabulary, the corpus's words,
    then w0, w1, ...)."""
    # the benchmark corpus's words are whole tokens, as common English words are in a real BERT vocabulary (else
    # each is cut into letters, and tokenizing, not the model, sets the pace)
    words = list(dict.fromkeys([*vocabulary(), *(w.lower() for w in CORPUS_WORDS), *EXTRA_WORDS]))[:size]
    words += [f"w{i}" for i in range(size - len(words))]
    return wordpiece(words, decoder=True)


def _bert(size: Size, positions: int = 512) -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=size.vocab,
        hidden_size=size.hidden,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        intermediate_size=size.ffn,
        max_position_embeddings=positions,
    )


def _save(model: Any, folder: Path, dtype: Any) -> None:
    model.to(dtype).eval().save_pretrained(folder)


def _sentence_transformers_files(folder: Path, dim: int, pooling: str, max_len: int) -> None:
    """modules.json and friends, so sentence-transformers loads the folder with the catalog's pooling."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_len, "do_lower_case": False}))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "2_Normalize").mkdir(exist_ok=True)
    pool = {"word_embedding_dimension": dim, "pooling_mode_cls_token": pooling == "cls"}
    pool["pooling_mode_mean_tokens"] = pooling == "mean"
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pool))


def build_embedder(folder: Path, size: Size, dtype: Any, device: str, *, pooling: str, max_len: int) -> Path:
    import torch
    from transformers import BertModel

    torch.manual_seed(0)
    with torch.device(device):
        model = BertModel(_bert(size))
    _save(model, folder, dtype)
    tokenizer(size.vocab).save_pretrained(folder)
    _sentence_transformers_files(folder, size.hidden, pooling, max_len)
    return folder


def build_reranker(folder: Path, size: Size, dtype: Any, device: str) -> Path:
    import torch
    from transformers import BertForSequenceClassification

    config = _bert(size)
    config.num_labels = 1
    torch.manual_seed(1)
    with torch.device(device):
        model = BertForSequenceClassification(config)
    _save(model, folder, dtype)
    tokenizer(size.vocab).save_pretrained(folder)
    return folder


def build_extractor(folder: Path, size: Size, dtype: Any, device: str, *, max_len: int) -> Path:
    """GLiNER's span model over a DeBERTa-v2 backbone of ``size`` (gliner's own save format)."""
    import torch
    from gliner import GLiNERConfig
    from gliner.model import UniEncoderSpanGLiNER
    from transformers import DebertaV2Config, DebertaV2Model

    backbone = folder.parent / (folder.name + "-backbone")
    config = DebertaV2Config(
        vocab_size=size.vocab,
        hidden_size=size.hidden,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        intermediate_size=size.ffn,
        max_position_embeddings=512,
        relative_attention=True,
        position_buckets=256,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        max_relative_positions=-1,
        type_vocab_size=0,
    )
    torch.manual_seed(2)
    with torch.device(device):
        DebertaV2Model(config).eval().save_pretrained(backbone)
    tokenizer(size.vocab).save_pretrained(backbone)
    gliner_config = GLiNERConfig(
        model_name=str(backbone),
        hidden_size=512 if size.hidden >= 512 else size.hidden,
        max_width=12,
        max_len=max_len,
        dropout=0.0,
        max_types=25,
        span_mode="markerV0",
    )
    model = UniEncoderSpanGLiNER.load_from_config(gliner_config)
    model.model.to(dtype)
    model.save_pretrained(str(folder))
    return folder


def build_generator(folder: Path, size: Size, dtype: Any, device: str, *, max_len: int) -> Path:
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    words = tokenizer(size.vocab)
    words.chat_template = CHAT_TEMPLATE
    words.model_input_names = ["input_ids", "attention_mask"]
    pad, bos, eos = (words.convert_tokens_to_ids(t) for t in ("[PAD]", "[CLS]", "[SEP]"))
    heads = size.heads
    config = Qwen3Config(
        vocab_size=size.vocab,
        hidden_size=size.hidden,
        intermediate_size=size.ffn,
        num_hidden_layers=size.layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        head_dim=128 if size.hidden >= 1024 else size.hidden // heads,
        max_position_embeddings=max_len,
        rope_theta=1_000_000.0,
        tie_word_embeddings=True,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    torch.manual_seed(3)
    with torch.device(device):
        model = Qwen3ForCausalLM(config)
    # the end-of-text row of the tied embedding at zero: its logit is 0 while the largest of the others is above
    # 0, so greedy decoding never ends early and every generation makes exactly the tokens asked for
    model.get_input_embeddings().weight.data[eos] = 0
    model.generation_config = GenerationConfig(bos_token_id=bos, eos_token_id=eos, pad_token_id=pad)
    _save(model, folder, dtype)
    words.save_pretrained(folder)
    return folder


def build_all(root: Path, *, small: bool, device: str) -> dict[str, Path]:
    """Every spec's model under ``root`` (one folder each); returns model id -> folder."""
    import torch

    # ``device``: where the random initialisation runs (the GPU takes seconds where the CPU takes a minute)
    half = torch.float32 if small else torch.float16
    built: dict[str, Path] = {}
    for spec in SPECS:
        size = spec.small if small else spec.full
        folder = root / spec.model_id.split("/")[-1]
        folder.mkdir(parents=True, exist_ok=True)
        if spec.family == "embedder":
            pooling = "cls" if spec.model_id == BERT_BASE else "mean"
            built[spec.model_id] = build_embedder(folder, size, half, device, pooling=pooling, max_len=256)
        elif spec.family == "reranker":
            built[spec.model_id] = build_reranker(folder, size, half, device)
        elif spec.family == "extractor":
            built[spec.model_id] = build_extractor(folder, size, half, device, max_len=384)
        else:
            dtype = torch.float32 if small else torch.bfloat16
            built[spec.model_id] = build_generator(folder, size, dtype, device, max_len=32768)
    return built
