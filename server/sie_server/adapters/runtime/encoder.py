"""The batchable families: encoders, pair scorers and span extractors.

Their work is batches of tokenized items, one forward pass per batch; the scheduler forms the
batches and calls ``run``. Each family declares only what it does: ``TextEncoder`` (and
``ImageEncoder``) for encode, ``PairScorer`` for cross-encoder scoring, ``SpanExtractor`` for
entity extraction. The service tokenizes with the family's own methods (off the event loop),
the scheduler runs the batch with the family's options type.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from sie_server.adapters.runtime.base import ModelAdapter, Tokens
from sie_server.adapters.runtime.options import (
    ClassifyOptions,
    DocumentOptions,
    EncodeOptions,
    EncodeOutput,
    Entity,
    ExtractOptions,
    MediaOptions,
    ScoreOptions,
    Span,
)

Opts = TypeVar("Opts", EncodeOptions, ScoreOptions, ExtractOptions, MediaOptions, DocumentOptions, ClassifyOptions)

WARMUP_TEXT = "warm up the kernels " * 4


class Encoder(ModelAdapter, Generic[Opts]):
    """A model whose work is batches: one forward pass over tokenized items, one result per item."""

    #: the options its batches carry; a batch with other options is not for this model
    options_type: ClassVar[type[object]]

    def accepts(self, options: object) -> bool:
        return isinstance(options, self.options_type)

    @abstractmethod
    def run(self, batch: list[Tokens], options: Opts) -> list[Any]:
        """One forward pass over the batch; one result per item, in order."""


class TextEncoder(Encoder[EncodeOptions]):
    """Texts in, vectors out: a dict per item holding the requested outputs (dense, sparse, multivector)."""

    options_type = EncodeOptions

    def format_text(self, text: str, *, is_query: bool, instruction: str | None) -> str:
        """The text as the model expects it (prefixes, instruction template)."""
        return text

    @abstractmethod
    def tokenize_texts(self, texts: list[str]) -> list[Tokens]:
        """Texts as they are, one ``Tokens`` each."""

    def encode_tokens(self, texts: list[str], *, is_query: bool, instruction: str | None) -> list[Tokens]:
        """Texts as tokens for ``run``, in their query or document role."""
        return self.tokenize_texts([self.format_text(t, is_query=is_query, instruction=instruction) for t in texts])

    @abstractmethod
    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[EncodeOutput]:
        """Each item's outputs: ``dense`` (vector), ``sparse`` ((indices, values)), ``multivector`` (matrix)."""

    def warmup(self) -> None:
        self.run(self.tokenize_texts([WARMUP_TEXT]) * 2, EncodeOptions())


@dataclass(frozen=True, slots=True)
class TextLayout:
    """Where a text's own tokens are in its untruncated ``Tokens`` (carried as their ``data``)."""

    lead: int  # tokens before the text's own: special tokens and the query/doc prefix
    trail: int  # special tokens after it
    #: each token's first character in the caller's text (-1 for lead and trail tokens)
    starts: list[int]


class LongTextEncoder(TextEncoder):
    """An encoder that also sees texts past its token limit: for ``truncation`` error (the count),
    chunk (windows of the text) and late chunking (one pass, vectors pooled over character spans)."""

    #: the most tokens one forward pass takes, special tokens included
    max_length: int = 0

    @abstractmethod
    def long_tokens(self, texts: list[str], *, is_query: bool, instruction: str | None) -> list[Tokens]:
        """Texts in their role, every token kept (``truncated`` False); ``data`` is their ``TextLayout``."""

    @property
    def sees_long_texts(self) -> bool:
        """Whether ``long_tokens`` tokenizes as ``encode_tokens`` does (a subclass that changes the
        tokenization, e.g. appending a token, may not: then the long-text options are refused)."""
        return True

    @property
    def pools_spans(self) -> bool:
        """Whether ``run`` with ``late_chunks`` can pool token ranges (mean-pooling models only)."""
        return False


class ImageEncoder(TextEncoder):
    """An encoder that also takes images (into the same space as its texts)."""

    @abstractmethod
    def image_tokens(self, images: list[bytes]) -> list[Tokens]:
        """Each image decoded and preprocessed (its pixels in ``data``); unreadable bytes: InvalidInput."""


class PairScorer(Encoder[ScoreOptions]):
    """(query, document) pairs in, one relevance score per pair out (cross-encoders)."""

    options_type = ScoreOptions

    @abstractmethod
    def tokenize_pairs(self, query: str, documents: list[str], instruction: str | None = None) -> list[Tokens]:
        """The query paired with each document; ``instruction`` for models whose prompt takes one (LLM
        rerankers: their default when None); a cross-encoder has no place for one and ignores it."""

    @abstractmethod
    def run(self, batch: list[Tokens], options: ScoreOptions) -> list[float]:
        """One score per pair."""

    def warmup(self) -> None:
        self.run(self.tokenize_pairs(WARMUP_TEXT, [WARMUP_TEXT]) * 2, ScoreOptions())


class SpanExtractor(Encoder[ExtractOptions]):
    """Texts in, labelled character spans out. A long text may be cut into several windows (queued
    items of their own); ``merge`` puts each text's spans back together."""

    options_type = ExtractOptions

    @abstractmethod
    def windows(self, texts: list[str]) -> list[Tokens]:
        """Each text as one or more windows; a window's ``data`` tells ``merge`` which text it came from."""

    @abstractmethod
    def run(self, batch: list[Tokens], options: ExtractOptions) -> list[list[Span]]:
        """The spans found in each window, offsets into that window."""

    @abstractmethod
    def merge(self, texts: int, windows: list[Tokens], found: list[list[Span]]) -> list[list[Entity]]:
        """Each of the ``texts`` texts' entities, offsets into the whole text, from its windows' spans."""
