"""The model families a config's ``adapter`` may name: the tasks each declares, the score mode of each
scorer, and the kinds of input each takes besides text."""

from __future__ import annotations

from enum import StrEnum

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


class ExtractKind(StrEnum):
    """What a model's ``extract`` does, each kind one handler (engine/extract/registry.py)."""

    ENTITIES = "entities"  # spans for the caller's labels in texts (GLiNER, GLiNER2 schemas)
    DOCUMENT = "document"  # whole documents parsed to markdown, text and blocks (docling)
    PICTURE = "picture"  # images and rendered PDF pages: OCR, detection, captions
    SPEECH = "speech"  # audio to a transcript
    CLASSIFICATION = "classification"  # labels with scores for texts
    GUARD = "guard"  # a causal LM's moderation verdict, generated on the decode loop


#: the extract kind each family with an extract task serves (a causal LM's is a guard when its config names one)
EXTRACT_KINDS: dict[str, ExtractKind] = {
    "gliner": ExtractKind.ENTITIES,
    "gliner2": ExtractKind.ENTITIES,
    "nli": ExtractKind.CLASSIFICATION,
    "gliclass": ExtractKind.CLASSIFICATION,
    "sequence_classifier": ExtractKind.CLASSIFICATION,
    "docling": ExtractKind.DOCUMENT,
    "docling_layout": ExtractKind.DOCUMENT,
    "rapidocr": ExtractKind.PICTURE,
    "tesseract": ExtractKind.PICTURE,
    "florence2": ExtractKind.PICTURE,
    "owlv2": ExtractKind.PICTURE,
    "grounding_dino": ExtractKind.PICTURE,
    "faster_whisper": ExtractKind.SPEECH,
    "whisper": ExtractKind.SPEECH,
}
#: the families whose extract answers ``classifications`` for texts (engine/extract/classification.py)
CLASSIFIERS = frozenset(f for f, kind in EXTRACT_KINDS.items() if kind is ExtractKind.CLASSIFICATION)
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


def extract_kind(adapter: str, inputs: list[str], guard: bool) -> ExtractKind:
    """The kind a model's extract serves: its family's; for a custom adapter class (or a family without one),
    what its inputs call for: audio a transcript, documents alone a parse, pictures without text a picture
    reader, a text model a guard when its config names a guard format, else entities."""
    family = EXTRACT_KINDS.get(adapter)
    if family is not None:
        return family
    if "audio" in inputs:
        return ExtractKind.SPEECH
    if "text" not in inputs:
        return ExtractKind.DOCUMENT if inputs == ["document"] else ExtractKind.PICTURE
    return ExtractKind.GUARD if guard else ExtractKind.ENTITIES


__all__ = ["CLASSIFIERS", "EXTRACT_KINDS", "FAMILIES", "MEDIA_INPUTS", "SCORE_MODES", "ExtractKind", "extract_kind"]
