"""Model families, grouped by the task they serve. ``create_adapter`` imports the family's module
(and torch) only when needed.

    runtime/     what every family shares: ModelAdapter (base.py), Encoder (encoder.py: batches the
                 scheduler runs), Generator (generator.py: what the decode loop steps), MediaExtractor
                 (media.py: pictures in), batch options, weights, precision, backends
    encoders/    encode: embedders, SPLADE, ColBERT, BGE-M3, CLIP/SigLIP, ColPali
    scorers/     score: cross-encoders, LLM rerankers
    extractors/  extract on text: GLiNER, GLiNER2
    documents/   extract on whole documents: docling, model-free or with its layout and table models
                 (parser.py: the DocumentParser contract)
    vision/      extract on pictures: PP-OCR (RapidOCR), Tesseract, Florence-2, OWLv2, Grounding DINO
    speech/      extract on audio: Whisper through faster-whisper (CTranslate2) and transformers
    classifiers/ extract on text as labels: zero-shot NLI, GLiClass, sequence-classification heads
    generators/  generate: transformers, llama.cpp, SGLang
"""

from __future__ import annotations

import importlib

from sie_server.adapters.runtime.backends import effective_backend
from sie_server.adapters.runtime.base import ModelAdapter, Tokens
from sie_server.catalog.schema import ModelConfig, Profile

_FAMILIES: dict[str, tuple[str, str]] = {
    "embedding": ("sie_server.adapters.encoders.embedding", "EmbeddingAdapter"),
    "decoder_embedding": ("sie_server.adapters.encoders.decoder_embedding", "DecoderEmbeddingAdapter"),
    "cross_encoder": ("sie_server.adapters.scorers.cross_encoder", "CrossEncoderAdapter"),
    "llm_reranker": ("sie_server.adapters.scorers.llm_reranker", "LlmRerankerAdapter"),
    "causal_lm": ("sie_server.adapters.generators.causal_lm", "CausalLMAdapter"),
    "splade": ("sie_server.adapters.encoders.splade", "SpladeAdapter"),
    "colbert": ("sie_server.adapters.encoders.colbert", "ColbertAdapter"),
    "bge_m3": ("sie_server.adapters.encoders.bge_m3", "BgeM3Adapter"),
    "clip": ("sie_server.adapters.encoders.clip", "ClipAdapter"),
    "colpali": ("sie_server.adapters.encoders.colpali", "ColPaliAdapter"),
    "gliner": ("sie_server.adapters.extractors.gliner", "GlinerAdapter"),
    "gliner2": ("sie_server.adapters.extractors.gliner2", "Gliner2Adapter"),
    "nli": ("sie_server.adapters.classifiers.nli", "NliClassifier"),
    "gliclass": ("sie_server.adapters.classifiers.gliclass", "GliClassAdapter"),
    "sequence_classifier": ("sie_server.adapters.classifiers.sequence", "SequenceClassifier"),
    "docling": ("sie_server.adapters.documents.docling", "DoclingAdapter"),
    "docling_layout": ("sie_server.adapters.documents.docling_layout", "DoclingLayoutAdapter"),
    "rapidocr": ("sie_server.adapters.vision.rapidocr", "RapidOcrAdapter"),
    "tesseract": ("sie_server.adapters.vision.tesseract", "TesseractAdapter"),
    "florence2": ("sie_server.adapters.vision.florence2", "Florence2Adapter"),
    "owlv2": ("sie_server.adapters.vision.owlv2", "Owlv2Adapter"),
    "grounding_dino": ("sie_server.adapters.vision.grounding_dino", "GroundingDinoAdapter"),
    "faster_whisper": ("sie_server.adapters.speech.faster_whisper", "FasterWhisperAdapter"),
    "whisper": ("sie_server.adapters.speech.whisper", "WhisperAdapter"),
}


def create_adapter(config: ModelConfig, profile: Profile, device: str) -> ModelAdapter:
    """An adapter of the config's family, or of a custom class named ``package.module:Class``."""
    backend = effective_backend(config, profile) if config.adapter == "causal_lm" else "transformers"
    if backend == "sglang":
        module, name = "sie_server.adapters.generators.sglang", "SglangAdapter"
    elif backend == "llamacpp":
        module, name = "sie_server.adapters.generators.llamacpp", "LlamaCppAdapter"
    elif config.adapter in _FAMILIES:
        module, name = _FAMILIES[config.adapter]
    else:
        module, name = config.adapter.split(":", 1)
    cls: type[ModelAdapter] = getattr(importlib.import_module(module), name)
    return cls(config, profile, device)


__all__ = ["ModelAdapter", "Tokens", "create_adapter"]
