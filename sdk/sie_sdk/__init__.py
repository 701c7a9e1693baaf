"""Python client for SIE, the inference server for small models.

>>> from sie_sdk import SIEClient
>>> with SIEClient() as client:
...     result = client.encode("sentence-transformers/all-MiniLM-L6-v2", "hello")
...     result["dense"].shape
(384,)
"""

from ._async import SIEAsyncClient
from ._items import from_file
from ._retry import DEFAULT_RETRY, NO_RETRY, USE_CLIENT_DEFAULT, RetryPolicy
from ._sync import SIEClient
from ._version import __version__
from .errors import (
    APIError,
    AuthenticationError,
    InferenceError,
    InvalidInputError,
    ModelLoadFailedError,
    ModelLoadingError,
    ModelNotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    ProtocolError,
    QueueFullError,
    RateLimitedError,
    RequestError,
    ResourceExhaustedError,
    ServerError,
    SIEConnectionError,
    SIEError,
    SIETimeoutError,
)
from .scoring import maxsim
from .types import (
    Classification,
    DetectedObject,
    DocumentInput,
    EncodeResult,
    Entity,
    ExtractResult,
    GenerateChunk,
    GenerateResult,
    Item,
    ItemError,
    Message,
    ModelInfo,
    ScoreEntry,
    ScoreResult,
    SparseVector,
)

__all__ = [
    "DEFAULT_RETRY",
    "NO_RETRY",
    "USE_CLIENT_DEFAULT",
    "APIError",
    "AuthenticationError",
    "Classification",
    "DetectedObject",
    "DocumentInput",
    "EncodeResult",
    "Entity",
    "ExtractResult",
    "GenerateChunk",
    "GenerateResult",
    "InferenceError",
    "InvalidInputError",
    "Item",
    "ItemError",
    "Message",
    "ModelInfo",
    "ModelLoadFailedError",
    "ModelLoadingError",
    "ModelNotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "ProtocolError",
    "QueueFullError",
    "RateLimitedError",
    "RequestError",
    "ResourceExhaustedError",
    "RetryPolicy",
    "SIEAsyncClient",
    "SIEClient",
    "SIEConnectionError",
    "SIEError",
    "SIETimeoutError",
    "ScoreEntry",
    "ScoreResult",
    "ServerError",
    "SparseVector",
    "__version__",
    "from_file",
    "maxsim",
]
