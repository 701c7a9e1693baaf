"""The files a hub download takes (adapters/weights.hub_patterns): everything the model loads, nothing else."""

from __future__ import annotations

from fnmatch import fnmatch

from sie_server.adapters.runtime.weights import hub_patterns
from sie_server.catalog.loader import parse_config_file
from tests.helpers.catalog import real_config_path


def taken(model_id: str, files: list[str]) -> list[str]:
    patterns = hub_patterns(parse_config_file(real_config_path(model_id)))
    return [f for f in files if any(fnmatch(f, p) for p in patterns)]  # as huggingface_hub filters


def test_sentence_transformers_heads_come_whatever_their_folder_number() -> None:
    files = [
        "model.safetensors",
        "modules.json",
        "1_Pooling/config.json",
        "2_Dense/config.json",
        "2_Dense/model.safetensors",
        "3_Dense/config.json",
        "3_Dense/pytorch_model.bin",
        "onnx/model.onnx",
        "pytorch_model.bin",
    ]
    assert taken("google/embeddinggemma-300m", files) == files[:7]


def test_a_repository_with_its_own_code_brings_its_python_files() -> None:
    files = ["config.json", "model.safetensors", "configuration_xlm_roberta.py", "modeling_lora.py"]
    assert taken("jinaai/jina-embeddings-v3", files) == files
    assert taken("sentence-transformers/all-MiniLM-L6-v2", files) == files[:2]  # no code runs from the hub


def test_a_ctranslate2_whisper_brings_its_model_bin() -> None:
    """faster-whisper's converted folders keep their weights in model.bin (no safetensors at all)."""
    files = ["config.json", "model.bin", "preprocessor_config.json", "tokenizer.json", "vocabulary.json", "README.md"]
    assert taken("Systran/faster-distil-whisper-large-v3", files) == files[:5]
    assert taken("Systran/faster-whisper-small", ["model.bin", "vocabulary.txt"]) == ["model.bin", "vocabulary.txt"]
