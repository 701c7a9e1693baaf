"""LanceDB adapter for SIE: embedding functions ``"sie"`` and ``"sie-multivector"``, and a reranker.

>>> import lancedb
>>> from lancedb.embeddings import get_registry
>>> from lancedb.pydantic import LanceModel, Vector
>>> import sie_lancedb  # registers "sie" and "sie-multivector"
>>> sie = get_registry().get("sie").create(model="sentence-transformers/all-MiniLM-L6-v2")
>>> class Doc(LanceModel):
...     text: str = sie.SourceField()
...     vector: Vector(sie.ndims()) = sie.VectorField()
>>> table = lancedb.connect("db").create_table("docs", schema=Doc)
>>> table.add([{"text": "Invoice INV-2024-0117 ..."}])
>>> table.search("what do we owe?").rerank(sie_lancedb.SIEReranker(model="...")).to_list()

Importing ``sie_lancedb`` registers both functions, so a table made with them reopens in
another process with ``db.open_table("docs")`` and no function passed.
"""

from ._embeddings import SIEEmbeddingFunction, SIEMultivectorEmbeddingFunction
from ._reranker import SIEReranker

__all__ = ["SIEEmbeddingFunction", "SIEMultivectorEmbeddingFunction", "SIEReranker"]
