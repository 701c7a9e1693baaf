"""GLiClass (knowledgator/gliclass-*): zero-shot classification in one pass per text, the labels
written into the text's own input (``<<LABEL>>`` tags), through the ``gliclass`` package.

One row per text (its cost: the tokens of the labels and the text together). ``classification_type``
single (a softmax over the labels) or multi (a sigmoid per label, the default, as GLiClass's pipeline).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.classify import Classified, Row, TextClassifier, ranked
from sie_server.adapters.runtime.options import ClassifyOptions
from sie_server.errors import InvalidInput

TYPES = {"single": "single-label", "single-label": "single-label", "multi": "multi-label", "multi-label": "multi-label"}


class GliClassAdapter(TextClassifier):
    option_names = frozenset({"classification_type"})
    model: Any = None
    pipe: Any = None  # gliclass's per-architecture pipeline: builds the inputs as the model was trained

    def load(self, weights: Path) -> None:
        from gliclass import GLiClassModel, ZeroShotClassificationPipeline
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(weights))
        model = GLiClassModel.from_pretrained(str(weights), local_files_only=True)
        kind = model.config.architecture_type
        if kind != "uni-encoder":
            raise ValueError(f"{weights}: GLiClass {kind} models are not served here (uni-encoder ones are)")
        self.max_length = int(self.config.max_sequence_length)
        pipeline = ZeroShotClassificationPipeline(
            model, tokenizer, max_classes=self.max_labels, max_length=self.max_length,
            device=self.device, progress_bar=False,
        )  # fmt: skip
        self.pipe = pipeline.pipe
        self.model = model.eval()

    def unload(self) -> None:
        self.model = self.pipe = None
        gc.collect()

    def resident_bytes(self) -> int:
        if self.model is None:
            return 0
        return sum(t.numel() * t.element_size() for t in [*self.model.parameters(), *self.model.buffers()])

    def kind(self, options: ClassifyOptions) -> str:
        return TYPES[str(self.settings(options).get("classification_type", "multi"))]

    def check(self, options: ClassifyOptions) -> None:
        super().check(options)
        kind = self.settings(options).get("classification_type", "multi")
        if kind not in TYPES:
            raise InvalidInput(f"params.options.classification_type must be single or multi; got {kind!r}")

    def rows(self, texts: list[str], options: ClassifyOptions) -> list[Tokens]:
        labels = list(options.labels)
        out = []
        for k, text in enumerate(texts):
            encoded = self.pipe.prepare_inputs([text], labels, same_labels=True)
            ids = [int(i) for i in encoded["input_ids"][0]]
            out.append(Tokens(ids, None, len(ids) >= self.max_length, Row(k)))
        return out

    def run(self, batch: list[Tokens], options: ClassifyOptions) -> list[list[float]]:
        """Each row's logits, one per label in the request's order."""
        width = max(t.length for t in batch)
        pad = int(self.pipe.tokenizer.pad_token_id or 0)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, t in enumerate(batch):
            ids[row, : t.length] = torch.tensor(t.input_ids, dtype=torch.long)
            mask[row, : t.length] = 1
        count = len(options.labels)
        with torch.inference_mode():
            out = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), max_num_classes=count)
        logits = out.logits.float().cpu()
        return [[float(v) for v in row[:count]] for row in logits]

    def combine(self, rows: list[Tokens], results: list[Any], options: ClassifyOptions) -> Classified:
        (logits,) = results
        values = torch.tensor(logits)
        single = self.kind(options) == "single-label"
        scores = torch.softmax(values, dim=-1) if single else torch.sigmoid(values)
        return ranked(list(options.labels), [float(s) for s in scores], options.threshold)
