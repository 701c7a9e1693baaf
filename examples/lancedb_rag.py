"""Hybrid retrieval with LanceDB on SIE: the "sie" embedding function, FTS, and SIEReranker.

    .venv/bin/pip install -e ".[lancedb]"
    make serve                              # another terminal
    .venv/bin/python examples/lancedb_rag.py [DB_FOLDER]

The table keeps the embedding function in its metadata: reopened in another process (after
``import sie_lancedb``) it embeds new rows and text queries by itself.
"""

from __future__ import annotations

import sys
import tempfile

import lancedb
from lancedb.embeddings import get_registry
from lancedb.pydantic import LanceModel, Vector
from rag_data import EMBEDDER, PASSAGES, QUESTION, RERANKER, skipped

from sie_lancedb import SIEReranker
from sie_sdk import APIError


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="sie-lancedb-")
    sie = get_registry().get("sie").create(model=EMBEDDER)

    class Note(LanceModel):
        text: str = sie.SourceField()
        vector: Vector(sie.ndims()) = sie.VectorField()  # type: ignore[valid-type]

    db = lancedb.connect(folder)
    table = db.create_table("notes", schema=Note, mode="overwrite")
    table.add([{"text": text} for text in PASSAGES])  # embedded by the server as they are added
    table.create_fts_index("text", replace=True)

    # 1. retrieve: vector + full-text
    hits = table.search(QUESTION, query_type="hybrid").limit(5).to_list()
    print("retrieved:", [row["text"][:40] for row in hits])

    # 2. rerank the hybrid results with an SIE score model
    try:
        ranked = table.search(QUESTION, query_type="hybrid").rerank(reranker=SIEReranker(RERANKER)).limit(2).to_list()
        print("reranked :", [(row["text"][:40], round(row["_relevance_score"], 3)) for row in ranked])
        best = ranked[0]["text"]
    except APIError as error:
        skipped("rerank", RERANKER, error)
        best = hits[0]["text"]
    print("best     :", best)
    print("table in :", folder)


if __name__ == "__main__":
    main()
