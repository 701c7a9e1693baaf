"""The text classifiers' contract: texts in, each text's labels with scores out, best first.

A ``TextClassifier`` (zero-shot NLI, GLiClass, fixed-label sequence-classification heads) turns a
request's texts into rows (``rows``): NLI makes one row per (text, label) pair, so a request with 20
labels is 20 rows that the scheduler puts into one batch (one forward pass, not 20); GLiClass and a
sequence head make one row per text. Each row's queue cost is its token count. ``run`` is one forward
pass over a batch of rows, ``combine`` turns one text's rows' results into its labels, best first.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, NamedTuple, TypedDict

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import Encoder
from sie_server.adapters.runtime.options import ClassifyOptions
from sie_server.errors import InvalidInput

DEFAULT_MAX_LABELS = 1000


class Label(TypedDict):
    label: str
    score: float


class Row(NamedTuple):
    """Which text of the request a row is for, and which of the request's labels (-1: all of them)."""

    text: int
    label: int = -1


class Classified(NamedTuple):
    """One text's answer: its labels best first (those at or above the request's threshold, if it gave
    one), and every label's score in the model's (or the request's) own label order."""

    labels: list[Label]
    scores: dict[str, float]


def softmax(values: Sequence[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    e = math.exp(value)
    return e / (1.0 + e)


def ranked(names: Sequence[str], scores: Sequence[float], threshold: float | None) -> Classified:
    """Labels best first (ties in the given order), dropping those under ``threshold`` when set."""
    order = sorted(range(len(names)), key=lambda k: -scores[k])
    labels = [Label(label=names[k], score=float(scores[k])) for k in order]
    if threshold is not None:
        labels = [label for label in labels if label["score"] >= threshold]
    return Classified(labels, {name: float(score) for name, score in zip(names, scores, strict=True)})


class TextClassifier(Encoder[ClassifyOptions]):
    """Texts in (rows carry a ``Row`` in ``data``), each text's ``Classified`` out."""

    options_type = ClassifyOptions
    #: the option names ``params.options`` may set for this family (others are refused with a 400)
    option_names: frozenset[str] = frozenset()
    #: whether a request must name its labels (zero-shot) or may leave them out (a fixed-label head)
    needs_labels: bool = True

    @property
    def max_labels(self) -> int:
        task = self.config.tasks.extract
        return task.max_labels if task is not None else DEFAULT_MAX_LABELS

    def settings(self, options: ClassifyOptions) -> dict[str, Any]:
        """The config's ``tasks.extract.options`` with the request's own options over them."""
        task = self.config.tasks.extract
        return {**(task.options if task is not None else {}), **options.settings()}

    def check(self, options: ClassifyOptions) -> None:
        """Raise InvalidInput for a request this model cannot serve: unknown options, no labels, too many."""
        unknown = sorted(set(options.settings()) - self.option_names)
        if unknown:
            allowed = ", ".join(sorted(self.option_names)) or "none"
            raise InvalidInput(
                f"params.options {unknown} are not options of model {self.config.id} (it takes: {allowed})"
            )
        labels = options.labels
        if self.needs_labels and not labels:
            raise InvalidInput('params.labels must name at least one label to score, e.g. ["billing", "support"]')
        if len(labels) > self.max_labels:
            raise InvalidInput(
                f"params.labels: {len(labels)} labels; model {self.config.id} takes at most {self.max_labels}"
            )
        if any(not label.strip() for label in labels):
            raise InvalidInput("params.labels: every label must be a non-empty string")
        if len(set(labels)) != len(labels):
            raise InvalidInput("params.labels names a label twice")

    @abstractmethod
    def rows(self, texts: list[str], options: ClassifyOptions) -> list[Tokens]:
        """The texts as queued rows, each with its ``Row`` (index into ``texts``) in ``data``."""

    @abstractmethod
    def run(self, batch: list[Tokens], options: ClassifyOptions) -> list[Any]:
        """One forward pass over the rows; one result per row (what ``combine`` reads)."""

    @abstractmethod
    def combine(self, rows: list[Tokens], results: list[Any], options: ClassifyOptions) -> Classified:
        """One text's labels from its rows (in the order ``rows`` made them) and their results."""

    def warmup(self) -> None:
        options = ClassifyOptions(labels=("billing", "support"))
        rows = self.rows(["warm up the kernels"], options)
        self.run(rows, options)
