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


def steer_attention(device: str) -> bool:
    """On a GPU, keep torch's scaled_dot_product_attention off its cuDNN backend; True when it was turned off.

    On Hopper (H100, H200) torch 2.11 prefers cuDNN attention, which builds a cuDNN graph for every new shape, and
    a decode step's keys grow by one token each step. Measured on an H200 (benchmarks.gpu_launch, 2026-12-04,
    torch 2.11.0+cu130): ``aten::_cudnn_attention_forward`` took 1.45 ms of host time per call, 60% of a
    Qwen3-0.6B decode step's 109 ms for one row. Flash and memory-efficient attention, which other GPUs get, stay.
    """
    if device_kind(device) != "cuda":
        return False
    import torch

    switch = getattr(torch.backends.cuda, "enable_cudnn_sdp", None)
    if switch is None:  # a torch without that backend
        return False
    switch(False)
    return True
