"""Choosing the device and naming its kind (the key of a model's profiles)."""

from __future__ import annotations


def resolve_device(requested: str) -> str:
    """'auto' is cuda when a GPU is visible, else cpu; 'cuda' without a GPU is an error."""
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but torch sees no CUDA device")
    return requested


def device_kind(device: str) -> str:
    return "cuda" if device.startswith("cuda") else "cpu"
