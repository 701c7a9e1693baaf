"""OWLv2 open-vocabulary detection (``Owlv2ForObjectDetection``): text queries in, boxes out.

Each of the request's ``params.labels`` is one text query (CLIP-tokenized, at most
``max_sequence_length`` tokens: 16 for OWLv2; a longer label is cut). The model proposes one box per
image patch (3600 for ViT-B/16 at 960 px) and scores it against every query; an object is a box
whose best query's score, ``sigmoid(logit)`` from 0 to 1, is above ``score_threshold``. It is labelled
with that query's label, as the caller spelled it. There is no non-maximum suppression: overlapping
boxes of one object can both come back. OWLv2's scores run low (0.1 to 0.3 is a good match), so the
usual threshold is 0.1.

OWLv2 pads a picture at the bottom and right to a square before resizing it to the model's input
(960 px), and its boxes are relative to that square: they are scaled by the picture's longer side
back to the picture's own pixels (``Owlv2ImageProcessorPil.post_process_object_detection``), so
they are right for pictures of any shape. A box that lies wholly in the padding is dropped.

Options (``params.options``): ``score_threshold``, from 0 to 1 (see ``detection.py`` for where the
default comes from). The processor is the PIL one (``Owlv2ImageProcessorPil``, numpy and scipy): it
needs no torchvision.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.media import Found, Picture
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.adapters.vision.detection import Detector, found_object, labels

OPTIONS = frozenset({"score_threshold"})


class Owlv2Adapter(Detector):
    option_names = OPTIONS
    score_option = "score_threshold"
    max_length: int = 16

    def load(self, weights: Path) -> None:
        from transformers import AutoTokenizer, Owlv2ForObjectDetection, Owlv2ImageProcessorPil, Owlv2Processor

        folder = str(weights)
        processor: Any = Owlv2Processor  # untyped
        self.processor = processor(
            image_processor=Owlv2ImageProcessorPil.from_pretrained(folder),
            tokenizer=AutoTokenizer.from_pretrained(folder),
        )
        self.model = self._from_pretrained(Owlv2ForObjectDetection, folder)
        positions = int(self.model.config.text_config.max_position_embeddings)
        self.max_length = min(self.config.max_sequence_length, positions)
        size = self.processor.image_processor.size
        self.input_size = (int(size.width), int(size.height))

    def run(self, batch: list[Tokens], options: MediaOptions) -> list[Found]:
        names = labels(options, self.task.max_labels)
        threshold = self.setting(self.score_option, options)
        queries = self.processor.tokenizer(
            list(names), padding="max_length", truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        found: list[Found] = []
        for pictures in self.passes(batch):
            found += self._detect(pictures, queries, names, threshold)
        return found

    def _detect(self, pictures: list[Picture], queries: Any, names: tuple[str, ...], threshold: float) -> list[Found]:
        """One forward pass: every picture against every query (the queries repeated per picture)."""
        pixels = self.processor.image_processor([p.image for p in pictures], return_tensors="pt")["pixel_values"]
        count = len(pictures)
        with torch.inference_mode():
            out = self.model(
                input_ids=queries["input_ids"].repeat(count, 1).to(self.device),
                attention_mask=queries["attention_mask"].repeat(count, 1).to(self.device),
                pixel_values=pixels.to(self.device, self.model.dtype),
            )
        return self.objects(out.logits, out.pred_boxes, pictures, names, threshold)

    def objects(
        self,
        logits: torch.Tensor,
        boxes: torch.Tensor,
        pictures: list[Picture],
        names: tuple[str, ...],
        threshold: float,
    ) -> list[Found]:
        """Each picture's objects from the model's outputs: ``logits`` (pictures, boxes, queries) and
        ``boxes`` (pictures, boxes, 4) as (cx, cy, w, h) relative to the padded square, best first."""
        outputs = SimpleNamespace(logits=logits.float().cpu(), pred_boxes=boxes.float().cpu())
        sizes = [(p.size[1], p.size[0]) for p in pictures]  # (height, width)
        results = self.processor.image_processor.post_process_object_detection(
            outputs, threshold=threshold, target_sizes=sizes
        )
        found = []
        for picture, result in zip(pictures, results, strict=True):
            objects = [
                found_object(names[int(index)], float(score), [float(c) for c in corners], picture)
                for score, index, corners in zip(result["scores"], result["labels"], result["boxes"], strict=True)
            ]
            kept = sorted((o for o in objects if o is not None), key=lambda o: -o["score"])
            found.append(Found(objects=kept))
        return found
