"""The model families a config's ``adapter`` may name: the tasks each declares, the score mode of each
scorer, and the kinds of input each takes besides text."""

from __future__ import annotations

# family -> (tasks it must declare, tasks it may declare)
FAMILIES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "embedding": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "decoder_embedding": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "cross_encoder": (frozenset({"score"}), frozenset({"score"})),
    "llm_reranker": (frozenset({"score"}), frozenset({"score"})),
    "splade": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "colbert": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "bge_m3": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "clip": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "colpali": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "gliner": (frozenset({"extract"}), frozenset({"extract"})),
    "gliner2": (frozenset({"extract"}), frozenset({"extract"})),
    # texts in, labels with scores out (adapters/classifiers)
    "nli": (frozenset({"extract"}), frozenset({"extract"})),
    "gliclass": (frozenset({"extract"}), frozenset({"extract"})),
    "sequence_classifier": (frozenset({"extract"}), frozenset({"extract"})),
    # causal LMs may add extract when their config names a guard format (tasks.extract.guard: a moderation verdict)
    "causal_lm": (frozenset({"generate"}), frozenset({"generate", "extract"})),
    # documents and images in (adapters/documents, adapters/vision)
    "docling": (frozenset({"extract"}), frozenset({"extract"})),
    "docling_layout": (frozenset({"extract"}), frozenset({"extract"})),
    "rapidocr": (frozenset({"extract"}), frozenset({"extract"})),
    "tesseract": (frozenset({"extract"}), frozenset({"extract"})),
    "florence2": (frozenset({"extract"}), frozenset({"extract"})),
    "owlv2": (frozenset({"extract"}), frozenset({"extract"})),
    "grounding_dino": (frozenset({"extract"}), frozenset({"extract"})),
    # audio in (adapters/speech)
    "faster_whisper": (frozenset({"extract"}), frozenset({"extract"})),
    "whisper": (frozenset({"extract"}), frozenset({"extract"})),
}
#: the families whose extract answers ``classifications`` for texts (engine/classify_extract.py)
CLASSIFIERS = frozenset({"nli", "gliclass", "sequence_classifier"})
#: what each family takes besides text ("document": a PDF's pages are rendered for a picture reader)
MEDIA_INPUTS: dict[str, tuple[str, ...]] = {
    "clip": ("text", "image"),
    "colpali": ("text", "image"),
    "docling": ("document",),
    "docling_layout": ("document",),
    "rapidocr": ("image", "document"),
    "tesseract": ("image", "document"),
    "florence2": ("image", "document"),
    "owlv2": ("image", "document"),
    "grounding_dino": ("image", "document"),
    "faster_whisper": ("audio",),
    "whisper": ("audio",),
}

SCORE_MODES = {
    "embedding": "bi_encoder",
    "decoder_embedding": "bi_encoder",
    "cross_encoder": "cross_encoder",
    "llm_reranker": "cross_encoder",
    "splade": "sparse_dot",
    "colbert": "maxsim",
    "bge_m3": "bi_encoder",
    "clip": "bi_encoder",
    "colpali": "maxsim",
}

__all__ = ["CLASSIFIERS", "FAMILIES", "MEDIA_INPUTS", "SCORE_MODES"]
