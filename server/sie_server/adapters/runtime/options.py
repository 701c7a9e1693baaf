"""What a batch is run with: one frozen value per kind of forward pass.

Items share a batch only when their options are equal, so these are hashable values (the
scheduler groups queued items by model and options). The type says which forward pass it is:
``EncodeOptions`` for encoders, ``ScoreOptions`` for pair scorers, ``ExtractOptions`` for span
extractors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypedDict, get_args

import numpy as np

OutputType = Literal["dense", "sparse", "multivector", "muvera"]
OUTPUT_TYPES: tuple[OutputType, ...] = get_args(OutputType)
#: outputs computed after the forward pass from another one (``engine/muvera.py``): the batch computes that one
DERIVED: dict[str, OutputType] = {"muvera": "multivector"}
Modality = Literal["text", "image"]


def canonical_outputs(names: Iterable[str]) -> tuple[OutputType, ...]:
    """The forward pass's output types for ``names``, in canonical order (equal sets give equal options);
    a derived output asks for the one it is computed from."""
    wanted = {DERIVED.get(name, name) for name in names}
    return tuple(t for t in OUTPUT_TYPES if t in wanted)


@dataclass(frozen=True, slots=True)
class EncodeOptions:
    """An encode batch: which outputs to compute, the items' role, and whether they are texts or images."""

    task: ClassVar[str] = "encode"

    output_types: tuple[OutputType, ...] = ("dense",)
    is_query: bool = False
    modality: Modality = "text"
    #: late chunking: each item's ``data`` holds token ranges; it also gets one pooled vector per range
    late_chunks: bool = False
    #: task LoRA adapter (jina-embeddings-v3): its name, one of the model's runtime.lora_tasks; None: no adapter
    lora_task: str | None = None


@dataclass(frozen=True, slots=True)
class ScoreOptions:
    """A batch of (query, document) pairs for a cross-encoder; nothing to choose yet."""

    task: ClassVar[str] = "score"


@dataclass(frozen=True, slots=True)
class ExtractOptions:
    """A span-extraction batch: the entity types to look for and the lowest score to report."""

    task: ClassVar[str] = "extract"

    labels: tuple[str, ...]
    threshold: float
    #: GLiNER2 schema extraction: the request's ``params.schema`` as JSON (items with different schemas
    #: never share a batch); None: plain entity extraction with ``labels``
    schema: str | None = None


@dataclass(frozen=True, slots=True)
class MediaOptions:
    """A batch of pictures for a media extractor (OCR, Florence-2, detectors): the labels to look for
    (detectors, phrase grounding), the request's threshold, and its ``params.options`` as canonical JSON
    (a task, box/text thresholds) so that only requests asking the same thing share a batch."""

    task: ClassVar[str] = "extract"

    labels: tuple[str, ...] = ()
    threshold: float | None = None
    options: str = "{}"

    @classmethod
    def of(cls, labels: Iterable[str] | None, threshold: float | None, options: dict[str, Any] | None) -> MediaOptions:
        return cls(tuple(labels or ()), threshold, json.dumps(options or {}, sort_keys=True, separators=(",", ":")))

    def settings(self) -> dict[str, Any]:
        """``params.options`` as the request gave them."""
        found: dict[str, Any] = json.loads(self.options)
        return found


@dataclass(frozen=True, slots=True)
class DocumentOptions:
    """A batch of documents for a document parser: the most pages one may have."""

    task: ClassVar[str] = "extract"

    max_pages: int = 1000


@dataclass(frozen=True, slots=True)
class ClassifyOptions:
    """A text-classification batch (NLI zero-shot, GLiClass, sequence-classification heads): the labels
    to score, the request's threshold, and its ``params.options`` as canonical JSON (a hypothesis
    template, multi_label) so that only requests asking the same thing share a batch."""

    task: ClassVar[str] = "extract"

    labels: tuple[str, ...] = ()
    threshold: float | None = None
    options: str = "{}"

    @classmethod
    def of(
        cls, labels: Iterable[str] | None, threshold: float | None, options: dict[str, Any] | None
    ) -> ClassifyOptions:
        return cls(tuple(labels or ()), threshold, json.dumps(options or {}, sort_keys=True, separators=(",", ":")))

    def settings(self) -> dict[str, Any]:
        """``params.options`` as the request gave them."""
        found: dict[str, Any] = json.loads(self.options)
        return found


BatchOptions = EncodeOptions | ScoreOptions | ExtractOptions | MediaOptions | DocumentOptions | ClassifyOptions


class EncodeOutput(TypedDict, total=False):
    """One item's encode outputs: those the batch's ``output_types`` asked for (an encoder may add others)."""

    dense: np.ndarray  # (dim,) float32
    sparse: tuple[np.ndarray, np.ndarray]  # (term indices int32 ascending, weights float32)
    multivector: np.ndarray  # (tokens, dim) float32
    muvera: np.ndarray  # (repetitions * 2**k_sim * d_proj,) float32: derived from multivector after the batch
    chunks: np.ndarray  # (spans, dim) float32: late chunking, one pooled vector per token range


class Span(TypedDict):
    """One entity a span extractor found, with character offsets into the text it was given."""

    text: str
    label: str
    score: float
    start: int
    end: int


class Entity(Span):
    """A span as the caller gets it: offsets into the whole item, and no bounding box (text input)."""

    bbox: None
