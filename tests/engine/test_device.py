"""sie_server/device.py: the device's kind, and on a GPU the attention backend kept off cuDNN's (which rebuilds a
graph for every new shape; a decode step's keys grow every step)."""

from __future__ import annotations

import pytest
import torch

from sie_server.device import device_kind, resolve_device, steer_attention


def test_kinds_and_auto() -> None:
    assert device_kind("cuda:1") == "cuda" and device_kind("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="torch sees no CUDA device"):
            resolve_device("cuda")


def test_a_gpu_turns_cudnn_attention_off_and_the_cpu_leaves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    monkeypatch.setattr(torch.backends.cuda, "enable_cudnn_sdp", calls.append)
    assert steer_attention("cpu") is False and calls == []
    assert steer_attention("cuda:0") is True and calls == [False]
    monkeypatch.delattr(torch.backends.cuda, "enable_cudnn_sdp")
    assert steer_attention("cuda") is False  # a torch without that backend: nothing to steer
