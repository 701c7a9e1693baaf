"""The small text set the ecosystem examples search, the question, and the model ids.

Models come from the environment so the same scripts run against any SIE server:
SIE_URL (default http://127.0.0.1:8080), SIE_EMBEDDER, SIE_RERANKER, SIE_GENERATOR.
"""

from __future__ import annotations

import os
from pathlib import Path

EMBEDDER = os.environ.get("SIE_EMBEDDER", "sentence-transformers/all-MiniLM-L6-v2")
RERANKER = os.environ.get("SIE_RERANKER", "cross-encoder/ms-marco-MiniLM-L-6-v2")
GENERATOR = os.environ.get("SIE_GENERATOR", "HuggingFaceTB/SmolLM2-135M-Instruct")

QUESTION = "How much do we owe Acme Corp, and when is it due?"
PASSAGES = [
    line.strip()
    for line in (Path(__file__).parent / "data" / "company_notes.txt").read_text().splitlines()
    if line.strip()
]


def prompt(context: list[str], question: str = QUESTION) -> str:
    """The user turn for the answer step: the retrieved passages, then the question."""
    lines = "\n".join(f"- {text}" for text in context)
    return f"Answer from these notes only, in one sentence.\nNotes:\n{lines}\nQuestion: {question}"


def skipped(step: str, model: str, error: Exception) -> None:
    print(f"{step}: skipped, {model} is not available on this server ({type(error).__name__}: {error})")


def rerank_best(candidates: list[str], question: str = QUESTION) -> str:
    """The candidate the reranker puts first, through the SDK's score call (the first one if the
    reranker is not on this server)."""
    from sie_sdk import APIError, SIEClient

    try:
        with SIEClient() as sie:
            ranked = sie.score(RERANKER, question, [{"id": str(i), "text": t} for i, t in enumerate(candidates)])
        return candidates[int(ranked["scores"][0]["item_id"])]
    except APIError as error:
        skipped("rerank", RERANKER, error)
        return candidates[0]
