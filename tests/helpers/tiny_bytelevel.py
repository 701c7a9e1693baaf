"""A tiny random causal LM with a byte-level BPE tokenizer (every string has tokens, as real LLMs'
tokenizers do), for constrained decoding: the grammar engine needs each token's bytes."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.tiny_models import CHAT_TEMPLATE, save_tiny_llama

CORPUS = [
    '{"issuer": "ACME Corp", "currency": "EUR", "total": 420, "paid": false, "lines": []}',
    "invoice total due payment order amount net tax chairs tables 0123456789 true false null",
    '[], {}, "": , ; yes no safe unsafe call answer name arguments',
]


def build_tiny_bytelevel_llm(folder: Path, seed: int = 3, max_positions: int = 512) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if (folder / "config.json").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<pad>", "<s>", "</s>"]
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(CORPUS, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    tokenizer.chat_template = CHAT_TEMPLATE
    return save_tiny_llama(folder, tokenizer, special=(0, 1, 2), seed=seed, max_positions=max_positions)
