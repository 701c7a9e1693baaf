"""ColPali / ColQwen2 visual document retrieval: page images and text queries into one late-interaction space.

The transformers-native ``ColPaliForRetrieval`` (PaliGemma backbone) and ``ColQwen2ForRetrieval``
(Qwen2-VL backbone) give one 128-dim, L2-normalised vector per token of their input; score with
MaxSim (``engine/service.py``). The model's own processor prepares both sides, as it was trained:

- a page image becomes the processor's visual prompt: ColPali resizes every page to the checkpoint's
  square resolution (448 px for colpali-v1.3: 32 x 32 = 1024 patch tokens) and appends a short
  "Describe the image." prompt; ColQwen2 keeps the page's aspect ratio (dynamic resolution, one token
  per 28 x 28 px after the 2 x 2 merge, bounded by the processor's ``max_pixels``) inside its
  chat-style prompt. The page's multivector has one vector per token of that sequence, patches and
  prompt alike (as colpali-engine scores them); the sequence length is the item's cost in the batch.
- a text becomes a query (``Question: `` / ``Query: `` prefix and ten augmentation tokens), whatever
  its role: these models embed documents as images.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import ImageEncoder
from sie_server.adapters.runtime.images import open_rgb
from sie_server.adapters.runtime.options import EncodeOptions, EncodeOutput
from sie_server.adapters.runtime.transformers_base import TransformersAdapter

#: model_type -> the transformers class that loads it
RETRIEVAL_CLASSES = {"colpali": "ColPaliForRetrieval", "colqwen2": "ColQwen2ForRetrieval"}
#: processor outputs laid out along the token sequence (padded like input_ids); the rest are per item
SEQUENCE_FIELDS = frozenset({"token_type_ids"})
#: processor outputs the forward pass does not take
DROPPED = frozenset({"input_ids", "attention_mask", "labels"})


def _stack(arrays: list[np.ndarray]) -> torch.Tensor:
    """Per-item arrays as one batch tensor; ColQwen2's patch rows are zero-padded to the longest item
    (the model unpads them with ``image_grid_thw``)."""
    if all(a.shape == arrays[0].shape for a in arrays):
        return torch.from_numpy(np.stack(arrays))
    rows = max(a.shape[0] for a in arrays)
    padded = [np.pad(a, [(0, rows - a.shape[0])] + [(0, 0)] * (a.ndim - 1)) for a in arrays]
    return torch.from_numpy(np.stack(padded))


class ColPaliAdapter(TransformersAdapter, ImageEncoder):
    processor: Any = None
    _kind: str = ""

    def _model_class(self) -> Any:
        import transformers

        return getattr(transformers, RETRIEVAL_CLASSES[self._kind])

    def load(self, weights: Path) -> None:
        from transformers import AutoConfig, AutoProcessor

        kind = str(AutoConfig.from_pretrained(str(weights)).model_type)
        if kind not in RETRIEVAL_CLASSES:
            raise ValueError(f"{weights}: model_type {kind!r} is not one of {sorted(RETRIEVAL_CLASSES)}")
        self._kind = kind
        super().load(weights)
        loader: Any = AutoProcessor
        self.processor = loader.from_pretrained(str(weights))

    def _from_processor(self, features: Any, *, truncate: bool) -> Tokens:
        """One processed item (a batch of one) as Tokens: its ids, and the other inputs in ``data``."""
        ids = [int(i) for i in features["input_ids"][0].tolist()]
        truncated = truncate and len(ids) > self.max_length
        keep = self.max_length if truncated else len(ids)
        data = {}
        for name, value in features.items():
            if name in DROPPED:
                continue
            array = value[0].numpy()
            data[name] = array[:keep] if name in SEQUENCE_FIELDS else array
        return Tokens(ids[:keep], None, truncated, data)

    def tokenize_texts(self, texts: list[str]) -> list[Tokens]:
        """Each text as the processor writes a query (prefix, text, augmentation tokens)."""
        return [self._from_processor(self.processor(text=[t], return_tensors="pt"), truncate=True) for t in texts]

    def image_tokens(self, images: list[bytes]) -> list[Tokens]:
        """Each page image decoded and laid out by the processor (its visual prompt and pixels)."""
        out = []
        for index, data in enumerate(images):
            picture = open_rgb(data, index)
            out.append(self._from_processor(self.processor(images=[picture], return_tensors="pt"), truncate=False))
        return out

    def pad(self, batch: list[Tokens]) -> dict[str, torch.Tensor]:
        """Right-padded ids and mask, sequence fields padded alike, pixel inputs stacked."""
        inputs = super().pad(batch)
        width = inputs["input_ids"].shape[1]
        for name in batch[0].data:
            arrays = [np.asarray(t.data[name]) for t in batch]
            if name in SEQUENCE_FIELDS:
                field = torch.zeros((len(batch), width), dtype=torch.long)
                for row, array in enumerate(arrays):
                    field[row, : len(array)] = torch.from_numpy(array.astype(np.int64))
                inputs[name] = field.to(self.device)
            elif name == "pixel_values":
                inputs[name] = _stack(arrays).to(self.device, self.model.dtype)
            else:
                inputs[name] = _stack(arrays).to(self.device)
        return inputs

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[EncodeOutput]:
        inputs = self.pad(batch)
        with torch.inference_mode():
            embeddings = self.model(**inputs).embeddings
            # the model normalises in its own dtype; again in float32 so every vector is unit length
            vectors = torch.nn.functional.normalize(embeddings.float(), p=2, dim=-1).cpu().numpy()
        return [{"multivector": vectors[row, : t.length].astype(np.float32)} for row, t in enumerate(batch)]
