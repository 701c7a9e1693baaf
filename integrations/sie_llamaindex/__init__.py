"""LlamaIndex adapter for SIE: an embedding model, a reranking node postprocessor, an LLM and a file reader.

>>> from llama_index.core import Settings
>>> from sie_llamaindex import SIEEmbedding, SIELLM, SIENodePostprocessor
>>> Settings.embed_model = SIEEmbedding(model="sentence-transformers/all-MiniLM-L6-v2")
>>> Settings.llm = SIELLM(model="HuggingFaceTB/SmolLM2-135M-Instruct")  # predict_and_call, structured_predict
>>> rerank = SIENodePostprocessor(model="cross-encoder/ms-marco-MiniLM-L-6-v2", top_n=3)
>>> documents = SIEReader("RapidAI/PP-OCRv6").load_data("invoice_scan.png")
"""

from ._embedding import SIEEmbedding
from ._llm import SIELLM
from ._postprocessor import SIENodePostprocessor
from ._reader import SIEReader

__all__ = ["SIELLM", "SIEEmbedding", "SIENodePostprocessor", "SIEReader"]
