"""CLIP, SigLIP and SigLIP2: texts and images encoded into one space (normalised projections).

SigLIP2's fixed-resolution checkpoints are SigLIP models; its NaFlex ones (model_type siglip2) keep an
image's aspect ratio, up to the processor's max_num_patches, and pass the patch mask and grid shape on."""

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

#: what the image processor gives that the image tower takes (the last two: SigLIP2 NaFlex)
IMAGE_INPUTS = ("pixel_values", "pixel_attention_mask", "spatial_shapes")
#: what one image costs in the token budget (a ViT-B/32 at 224 px sees 50 patches; larger towers more)
IMAGE_COST_TOKENS = 256


def _features(output: Any) -> torch.Tensor:
    """get_*_features returns a tensor (older transformers) or an output whose pooler holds it."""
    return output if isinstance(output, torch.Tensor) else output.pooler_output


class ClipAdapter(TransformersAdapter, ImageEncoder):
    processor: Any = None

    def _model_class(self) -> Any:
        from transformers import AutoModel

        return AutoModel

    def load(self, weights: Path) -> None:
        from transformers import AutoImageProcessor

        super().load(weights)
        loader: Any = AutoImageProcessor
        self.processor = loader.from_pretrained(str(weights))

    def image_tokens(self, images: list[bytes]) -> list[Tokens]:
        """Decode and preprocess images (off the event loop); bad bytes are the caller's error."""
        out = []
        for index, data in enumerate(images):
            picture = open_rgb(data, index)
            # pixel_values; SigLIP2 NaFlex adds its patch mask and grid shape (fixed sizes: patches are padded)
            features = self.processor(images=picture, return_tensors="np")
            inputs = {name: np.asarray(value[0]) for name, value in features.items() if name in IMAGE_INPUTS}
            inputs["pixel_values"] = inputs["pixel_values"].astype(np.float32)
            out.append(Tokens([0] * IMAGE_COST_TOKENS, None, False, inputs))
        return out

    def format_text(self, text: str, *, is_query: bool, instruction: str | None) -> str:
        return text.lower() if self.config.runtime.lowercase else text  # SigLIP2: trained on lowercased text

    def pad(self, batch: list[Tokens]) -> dict[str, torch.Tensor]:
        if not self.config.runtime.pad_to_max_length:
            return super().pad(batch)
        width = self.max_length  # SigLIP: every text padded to the trained length, no attention mask
        ids = torch.full((len(batch), width), self._pad_id, dtype=torch.long)
        for row, t in enumerate(batch):
            ids[row, : t.length] = torch.tensor(t.input_ids[:width], dtype=torch.long)
        return {"input_ids": ids.to(self.device)}

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[EncodeOutput]:
        with torch.inference_mode():
            if options.modality == "image":
                images = {name: torch.from_numpy(np.stack([t.data[name] for t in batch])) for name in batch[0].data}
                images = {name: value.to(self.device) for name, value in images.items()}
                images["pixel_values"] = images["pixel_values"].to(self.model.dtype)
                features = _features(self.model.get_image_features(**images))
            else:
                inputs = self.pad(batch)
                inputs.pop("token_type_ids", None)
                features = _features(self.model.get_text_features(**inputs))
            vectors = torch.nn.functional.normalize(features.float(), dim=-1).cpu().numpy()
        return [{"dense": v} for v in vectors]

    def warmup(self) -> None:
        self.run(self.tokenize_texts(["a photo of a cat"]), EncodeOptions())
