"""sentence-transformers modules after pooling: ``Dense`` projections and ``Normalize``.

A sentence-transformers model folder lists its pipeline in ``modules.json`` (Transformer, Pooling,
then optional heads). The embedder pools itself; this module reads the heads that follow pooling
so EmbeddingGemma (Dense 768->3072->768) and LaBSE (Dense + tanh, Normalize) give their real
vectors. Each Dense folder holds ``config.json`` (in_features, out_features, bias,
activation_function) and ``model.safetensors`` or ``pytorch_model.bin`` (``linear.weight``,
``linear.bias``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

DENSE = "sentence_transformers.models.Dense"
NORMALIZE = "sentence_transformers.models.Normalize"
#: modules a pooled embedder handles itself (or that change nothing after pooling)
_BEFORE_HEADS = frozenset(
    {
        "sentence_transformers.models.Transformer",
        "sentence_transformers.models.Pooling",
        "sentence_transformers.Transformer",
    }
)
#: the activation names sentence-transformers writes, and the function each is
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "torch.nn.modules.linear.Identity": lambda x: x,
    "torch.nn.modules.activation.Tanh": torch.tanh,
    "torch.nn.modules.activation.ReLU": torch.relu,
    "torch.nn.modules.activation.Sigmoid": torch.sigmoid,
    "torch.nn.modules.activation.GELU": torch.nn.functional.gelu,
}


@dataclass(frozen=True)
class DenseLayer:
    weight: torch.Tensor  # (out_features, in_features)
    bias: torch.Tensor | None
    activation: Callable[[torch.Tensor], torch.Tensor]

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.linear(x.to(self.weight.dtype), self.weight, self.bias)
        return self.activation(y)


@dataclass(frozen=True)
class Heads:
    """What follows pooling: Dense layers in order, then whether ``Normalize`` is listed."""

    dense: tuple[DenseLayer, ...]
    normalize: bool

    def __call__(self, pooled: torch.Tensor) -> torch.Tensor:
        for layer in self.dense:
            pooled = layer(pooled)
        return pooled

    def nbytes(self) -> int:
        tensors = [t for layer in self.dense for t in (layer.weight, layer.bias) if t is not None]
        return sum(t.numel() * t.element_size() for t in tensors)


NO_HEADS = Heads(dense=(), normalize=False)


def load_heads(folder: Path, device: str) -> Heads:
    """The heads ``folder/modules.json`` lists after pooling (none without the file); a module this
    server cannot apply is a ``ValueError`` naming it, not a silently different vector."""
    listing = folder / "modules.json"
    if not listing.is_file():
        return NO_HEADS
    modules: list[dict[str, Any]] = json.loads(listing.read_text())
    dense: list[DenseLayer] = []
    normalize = False
    for module in sorted(modules, key=lambda m: int(m.get("idx", 0))):
        kind = str(module.get("type", ""))
        if kind == DENSE:
            dense.append(_dense(folder / str(module.get("path", "")), device))
        elif kind == NORMALIZE:
            normalize = True
        elif kind not in _BEFORE_HEADS:
            raise ValueError(f"{listing}: module {kind!r} is not supported after pooling")
    return Heads(dense=tuple(dense), normalize=normalize)


def _dense(path: Path, device: str) -> DenseLayer:
    config = json.loads((path / "config.json").read_text())
    name = str(config.get("activation_function", "torch.nn.modules.linear.Identity"))
    if name not in ACTIVATIONS:
        raise ValueError(f"{path}: Dense activation {name!r} is not one of {sorted(ACTIVATIONS)}")
    state = _state(path)
    weight = state["linear.weight"].float()
    shape = (int(config["out_features"]), int(config["in_features"]))
    if tuple(weight.shape) != shape:
        raise ValueError(f"{path}: linear.weight is {tuple(weight.shape)}, config.json says {shape}")
    bias = state.get("linear.bias") if config.get("bias", True) else None
    return DenseLayer(
        weight=weight.to(device),
        bias=None if bias is None else bias.float().to(device),
        activation=ACTIVATIONS[name],
    )


def _state(path: Path) -> dict[str, torch.Tensor]:
    if (path / "model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(str(path / "model.safetensors"))
    if (path / "pytorch_model.bin").is_file():
        loaded: dict[str, torch.Tensor] = torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
        return loaded
    raise ValueError(f"{path}: no model.safetensors or pytorch_model.bin for the Dense layer")
