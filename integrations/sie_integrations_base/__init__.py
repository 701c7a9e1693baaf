"""The part every SIE ecosystem adapter shares: settings, clients, batching, roles, scores.

Each adapter (``sie_langchain``, ``sie_llamaindex``, ``sie_chroma``, ``sie_qdrant``,
``sie_weaviate``, ``sie_lancedb``) holds one ``SIEBackend`` and only translates between its
ecosystem's types and these calls. Errors are the SDK's typed exceptions
(``sie_sdk.ModelNotFoundError``, ``sie_sdk.InvalidInputError``, ...), passed through unchanged.
"""

from ._backend import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_TIMEOUT_S,
    SIEBackend,
    chunked,
    model_served,
    resolve_base_url,
)
from ._chat import CHAT_OPTIONS, ChatAnswer, ToolCall, achat_completion, chat_completion, function_tool, inline_refs
from ._documents import Mode, ParsedFile, aparse_file, check_mode, parse_file, parse_result
from ._vectorizer import SparseDict, VectorizerCore

__all__ = [
    "CHAT_OPTIONS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_TIMEOUT_S",
    "ChatAnswer",
    "Mode",
    "ParsedFile",
    "SIEBackend",
    "SparseDict",
    "ToolCall",
    "VectorizerCore",
    "achat_completion",
    "aparse_file",
    "chat_completion",
    "check_mode",
    "chunked",
    "function_tool",
    "inline_refs",
    "model_served",
    "parse_file",
    "parse_result",
    "resolve_base_url",
]
