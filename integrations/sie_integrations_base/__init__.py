"""The part every SIE ecosystem adapter shares: settings, clients, batching, roles, scores.

Each adapter (``sie_langchain``, ``sie_llamaindex``, ``sie_chroma``, ``sie_qdrant``,
``sie_weaviate``, ``sie_lancedb``, ``sie_haystack``, ``sie_dspy``, ``sie_crewai``) holds one
``SIEBackend`` and only translates between its ecosystem's types and these calls. Errors are the SDK's typed exceptions
(``sie_sdk.ModelNotFoundError``, ``sie_sdk.InvalidInputError``, ...), passed through unchanged.
"""

from ._backend import SIEBackend, model_served
from ._batches import chunked
from ._chat import CHAT_OPTIONS, ChatAnswer, ToolCall, achat_completion, chat_completion, function_tool, inline_refs
from ._documents import Mode, ParsedFile, aparse_file, check_mode, parse_file, parse_result
from ._embedders import SparseEmbedder
from ._results import SparseDict, as_float32, as_floats, check_top_k, rank_order, sparse_dict
from ._settings import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, BackendOptions, CallOptions, resolve_base_url
from ._vectorizer import VectorizerCore

__all__ = [
    "CHAT_OPTIONS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_TIMEOUT_S",
    "BackendOptions",
    "CallOptions",
    "ChatAnswer",
    "Mode",
    "ParsedFile",
    "SIEBackend",
    "SparseDict",
    "SparseEmbedder",
    "ToolCall",
    "VectorizerCore",
    "achat_completion",
    "aparse_file",
    "as_float32",
    "as_floats",
    "chat_completion",
    "check_mode",
    "check_top_k",
    "chunked",
    "function_tool",
    "inline_refs",
    "model_served",
    "parse_file",
    "parse_result",
    "rank_order",
    "resolve_base_url",
    "sparse_dict",
]
