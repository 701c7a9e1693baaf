"""RAG with DSPy on SIE: retrieve with dspy.retrievers.Embeddings, rerank, answer with dspy.Predict.

    .venv/bin/pip install -e ".[dspy]"
    make serve                              # another terminal
    .venv/bin/python examples/dspy_rag.py

The LM is DSPy's own client (``dspy.LM("openai/<model>", api_base=<server>/v1)``) on the server's
OpenAI-compatible chat completions. A small model does not reliably write DSPy's field markers, so
the answer step asks the server for JSON of the signature's shape (``response_format``), which its
constrained decoding always keeps. Steps whose model this server does not serve print a skip message.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM's import would fetch a price list

import dspy
from dspy.utils.exceptions import LMUnsupportedModelError
from rag_data import EMBEDDER, GENERATOR, PASSAGES, QUESTION, RERANKER, skipped

from sie_dspy import SIEEmbedder, SIEReranker, sie_lm
from sie_sdk import APIError

ANSWER_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "answer",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    },
}


def main() -> None:
    # 1. embed the notes and retrieve (dspy.Embedder batches the texts; the server embeds them)
    embedder = dspy.Embedder(SIEEmbedder(EMBEDDER), caching=False)
    search = dspy.retrievers.Embeddings(corpus=PASSAGES, embedder=embedder, k=5)
    candidates = search(QUESTION).passages
    print("retrieved:", [text[:40] for text in candidates])

    # 2. rerank the candidates
    try:
        ranked = SIEReranker(RERANKER, k=2)(query=QUESTION, passages=candidates)
        best = ranked.passages
        print("reranked :", [(text[:40], round(score, 3)) for text, score in zip(best, ranked.scores, strict=True)])
    except APIError as error:
        skipped("rerank", RERANKER, error)
        best = candidates[:2]
    print("best     :", best[0])

    # 3. answer with the server's LLM through DSPy
    lm = sie_lm(GENERATOR, max_tokens=48, temperature=0.0, cache=False)
    respond = dspy.Predict("context: list[str], question: str -> answer: str")
    try:
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            answer = respond(context=best, question=QUESTION, config={"response_format": ANSWER_FORMAT})
    except LMUnsupportedModelError as error:  # DSPy's word for the server's MODEL_NOT_FOUND
        skipped("answer", GENERATOR, error)
        return
    print("answer   :", answer.answer)
    print("usage    :", lm.history[-1]["usage"])


if __name__ == "__main__":
    main()
