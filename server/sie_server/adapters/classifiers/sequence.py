"""Fixed-label classifiers: a sequence-classification head (sentiment, toxicity, prompt injection,
moderation categories) scores every label the model has (its config's id2label).

Scores are a softmax over the labels, or a sigmoid per label when the model's config says
``problem_type: multi_label_classification`` (or it has a single label). ``params.labels`` is
optional: when given, only those of the model's labels are answered.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.classify import Classified, Row, TextClassifier, ranked, sigmoid, softmax
from sie_server.adapters.runtime.options import ClassifyOptions
from sie_server.adapters.runtime.transformers_base import TransformersAdapter
from sie_server.errors import InvalidInput


class SequenceClassifier(TransformersAdapter, TextClassifier):
    needs_labels = False
    names: list[str] = []  # the model's labels in id order
    independent: bool = False  # sigmoid per label (multi-label), not a softmax over them

    def _model_class(self) -> Any:
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification

    def load(self, weights: Any) -> None:
        super().load(weights)
        config = self.model.config
        id2label = {int(k): str(v) for k, v in config.id2label.items()}
        self.names = [id2label[k] for k in sorted(id2label)]
        self.independent = config.problem_type == "multi_label_classification" or len(self.names) == 1

    @property
    def max_labels(self) -> int:
        return max(len(self.names), 1)

    def check(self, options: ClassifyOptions) -> None:
        super().check(options)
        unknown = [label for label in options.labels if label not in self.names]
        if unknown:
            raise InvalidInput(
                f"params.labels {unknown} are not labels of model {self.config.id}; it has {self.names} "
                "(leave params.labels out for all of them)"
            )

    def rows(self, texts: list[str], options: ClassifyOptions) -> list[Tokens]:
        tokens = self._to_tokens(self.tokenizer.encode_batch(texts))
        return [replace(token, data=Row(k)) for k, token in enumerate(tokens)]

    def run(self, batch: list[Tokens], options: ClassifyOptions) -> list[list[float]]:
        """Each row's logits, one per label in id order."""
        with torch.inference_mode():
            logits = self.model(**self.pad(batch)).logits.float().cpu()
        return [[float(v) for v in row] for row in logits]

    def combine(self, rows: list[Tokens], results: list[Any], options: ClassifyOptions) -> Classified:
        (logits,) = results
        scores = [sigmoid(v) for v in logits] if self.independent else softmax(logits)
        if options.labels:
            keep = [self.names.index(label) for label in options.labels]
            return ranked([self.names[k] for k in keep], [scores[k] for k in keep], options.threshold)
        return ranked(self.names, scores, options.threshold)
