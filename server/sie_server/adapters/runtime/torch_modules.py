"""What an adapter that holds a torch module does on unload and when it is measured."""

from __future__ import annotations

import gc
from typing import Any


def release(device: str) -> None:
    """After the adapter dropped its module: collect its reference cycles, hand CUDA's cached blocks back."""
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def module_bytes(model: Any) -> int:
    """Bytes of a module's parameters and buffers (0 for no module)."""
    if model is None:
        return 0
    tensors = [*model.parameters(), *model.buffers()]
    return int(sum(t.numel() * t.element_size() for t in tensors))
