"""DSPy adapter for SIE: an embedder for ``dspy.Embedder`` and ``dspy.retrievers.Embeddings``, a sparse
embedder, a reranking module, and ``sie_lm`` for the LM through the server's OpenAI-compatible routes.

>>> import dspy
>>> from sie_dspy import SIEEmbedder, sie_lm
>>> dspy.configure(lm=sie_lm("HuggingFaceTB/SmolLM2-135M-Instruct"))
>>> search = dspy.retrievers.Embeddings(corpus=passages, embedder=SIEEmbedder("BAAI/bge-small-en-v1.5"), k=3)

LiteLLM fetches a model price list from the internet when it is imported; offline, set
``LITELLM_LOCAL_MODEL_COST_MAP=True`` before importing DSPy.
"""

from ._embedder import SIEEmbedder, SIESparseEmbedder
from ._modules import SIEReranker, sie_lm

__all__ = ["SIEEmbedder", "SIEReranker", "SIESparseEmbedder", "sie_lm"]
