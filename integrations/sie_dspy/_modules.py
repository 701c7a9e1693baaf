"""DSPy modules on SIE: ``SIEReranker`` (passages reordered by a score model) and ``sie_lm`` (a ``dspy.LM``
on an SIE generate model through the server's OpenAI-compatible ``/v1/chat/completions``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Unpack

import dspy

from sie_integrations_base import BackendOptions, SIEBackend, check_top_k, resolve_base_url


def sie_lm(model: str, *, base_url: str | None = None, api_key: str | None = None, **kwargs: Any) -> dspy.LM:
    """``dspy.LM("openai/<model>", api_base=<server>/v1, api_key=...)``: DSPy's own client (LiteLLM, or its
    native engine) speaking OpenAI's chat completions to the server. ``base_url`` ``None``: ``$SIE_URL``,
    else http://127.0.0.1:8080; ``api_key`` ``None``: ``$SIE_API_KEY`` (a server without keys takes any);
    ``kwargs`` go to ``dspy.LM`` (``temperature``, ``max_tokens``, ``cache``, ``engine``, ...)."""
    key = api_key or os.environ.get("SIE_API_KEY") or "no-key"
    return dspy.LM(f"openai/{model}", api_base=f"{resolve_base_url(base_url)}/v1", api_key=key, **kwargs)


class SIEReranker(dspy.Module):  # type: ignore[misc]
    """``reranker(query=..., passages=[...], k=None)`` gives ``dspy.Prediction(passages, scores, indices)``,
    best first, at most ``k`` (the constructor's unless given): ``indices`` are positions in ``passages``."""

    def __init__(self, model: str, *, k: int | None = None, **options: Unpack[BackendOptions]) -> None:
        """``options``: ``base_url``, ``priority``, ``instruction``, ``batch_size``, ``timeout``, ``api_key``
        (``sie_integrations_base.BackendOptions``)."""
        super().__init__()
        self.k = k
        self.backend = SIEBackend(model, **options)

    def forward(self, query: str, passages: Sequence[str], k: int | None = None) -> dspy.Prediction:
        passages = list(passages)
        limit = self.k if k is None else k
        check_top_k(limit, "k")
        ranked = self.backend.rank(query, passages, top_k=limit)
        return dspy.Prediction(
            passages=[passages[i] for i, _ in ranked],
            scores=[score for _, score in ranked],
            indices=[i for i, _ in ranked],
        )
