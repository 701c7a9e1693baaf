"""Zero-shot classification with an NLI model (bart-large-mnli, the MoritzLaurer zero-shot family,
cross-encoder/nli-*), as transformers' zero-shot pipeline does it.

Each (text, label) pair is one row: the text as premise, ``hypothesis_template`` filled with the
label as hypothesis; a request's rows are queued together, so 20 labels are one batch of 20 rows.
Single-label: a softmax over the labels' entailment logits. ``multi_label``: each label on its own,
a softmax over its [contradiction, entailment] logits.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.classify import Classified, Row, TextClassifier, ranked, softmax
from sie_server.adapters.runtime.options import ClassifyOptions
from sie_server.adapters.runtime.transformers_base import TransformersAdapter
from sie_server.errors import InvalidInput

DEFAULT_TEMPLATE = "This example is {}."


def nli_ids(label2id: dict[str, int]) -> tuple[int, int]:
    """(entailment id, contradiction id) from a config's label2id: the label starting with "entail", and
    the one starting with "contra" or "not_entail" (else transformers' rule: 0, or the last if entailment is 0)."""
    names = {name.lower(): int(index) for name, index in label2id.items()}
    entail = next((i for n, i in names.items() if n.startswith("entail")), None)
    if entail is None:
        raise ValueError(f"no entailment label in the model's label2id {sorted(label2id)}")
    contra = next((i for n, i in names.items() if n.startswith(("contra", "not_entail", "not-entail"))), None)
    if contra is None:
        contra = -1 if entail == 0 else 0
    return entail, contra


class NliClassifier(TransformersAdapter, TextClassifier):
    option_names = frozenset({"hypothesis_template", "multi_label"})
    entailment: int = 0
    contradiction: int = 0

    def _model_class(self) -> Any:
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification

    def load(self, weights: Any) -> None:
        super().load(weights)
        self.entailment, self.contradiction = nli_ids(dict(self.model.config.label2id))

    def template(self, options: ClassifyOptions) -> str:
        return str(self.settings(options).get("hypothesis_template", DEFAULT_TEMPLATE))

    def multi_label(self, options: ClassifyOptions) -> bool:
        return bool(self.settings(options).get("multi_label", False))

    def check(self, options: ClassifyOptions) -> None:
        super().check(options)
        settings = self.settings(options)
        template = settings.get("hypothesis_template", DEFAULT_TEMPLATE)
        if not isinstance(template, str) or "{}" not in template:
            raise InvalidInput(
                f"params.options.hypothesis_template must be a string holding {{}} where the label goes, "
                f"e.g. {DEFAULT_TEMPLATE!r}; got {template!r}"
            )
        try:
            template.format("label")
        except (IndexError, KeyError, ValueError) as exc:
            raise InvalidInput(
                f"params.options.hypothesis_template {template!r} is not a valid template: {exc}"
            ) from None
        if not isinstance(settings.get("multi_label", False), bool):
            raise InvalidInput("params.options.multi_label must be true or false")

    def rows(self, texts: list[str], options: ClassifyOptions) -> list[Tokens]:
        template = self.template(options)
        hypotheses = [template.format(label) for label in options.labels]
        pairs = [(text, hypothesis) for text in texts for hypothesis in hypotheses]
        tokens = self._to_tokens(self.tokenizer.encode_batch(pairs))
        where = [Row(t, k) for t in range(len(texts)) for k in range(len(hypotheses))]
        return [replace(token, data=row) for token, row in zip(tokens, where, strict=True)]

    def run(self, batch: list[Tokens], options: ClassifyOptions) -> list[tuple[float, float]]:
        """Each row's (entailment, contradiction) logits."""
        with torch.inference_mode():
            logits = self.model(**self.pad(batch)).logits.float().cpu()
        return [(float(row[self.entailment]), float(row[self.contradiction])) for row in logits]

    def combine(self, rows: list[Tokens], results: list[Any], options: ClassifyOptions) -> Classified:
        labels = [options.labels[row.data.label] for row in rows]
        if self.multi_label(options):
            scores = [softmax([contra, entail])[1] for entail, contra in results]
        else:
            scores = softmax([entail for entail, _ in results])
        return ranked(labels, scores, options.threshold)
