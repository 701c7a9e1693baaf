"""Error answers: SIE's envelope ``{"detail": {"code", "message"}}``, on the OpenAI routes OpenAI's
``{"error": {"message", "type", "param", "code"}}``, on Ollama's ``{"error": "<message>"}``, on TEI's
``{"error", "error_type"}`` with TEI's statuses (``contract/tei_wire.py``); all carry ``X-SIE-Error-Code``.

Also the way back: an error answer read (by the gateway) into the ``SIEError`` that made it.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

from sie_server.contract import headers as h
from sie_server.contract.tei_wire import is_tei_path, tei_error
from sie_server.errors import ERROR_STATUS, ErrorCode, SIEError


class Shape(StrEnum):
    SIE = "sie"
    OPENAI = "openai"
    BOTH = "both"  # routes both kinds of client call (``/v1/models``): each finds its key
    OLLAMA = "ollama"  # Ollama's ``{"error": "<message>"}``
    TEI = "tei"  # Text Embeddings Inference's ``{"error": "<message>", "error_type": "Validation"}``, TEI's statuses


# paths whose clients read OpenAI's error shape
OPENAI_PATHS = frozenset(
    {
        "/v1/embeddings",
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/responses",
        "/v1/moderations",
        "/v1/audio/transcriptions",
    }
)
SHARED_PREFIX = "/v1/models"
OPENAI_PREFIXES = ("/v1/files", "/v1/batches")  # the Batch API (api/routes/batches.py)
OLLAMA_PREFIX = "/api/"  # Ollama's routes (api/routes/ollama.py)


def shape_for(path: str) -> Shape:
    if path in OPENAI_PATHS or path.startswith(OPENAI_PREFIXES):
        return Shape.OPENAI
    if is_tei_path("POST", path):  # (``/`` too: its GET is the status page, which answers no error)
        return Shape.TEI
    if path.startswith(OLLAMA_PREFIX):
        return Shape.OLLAMA
    return Shape.BOTH if path.startswith(SHARED_PREFIX) else Shape.SIE


def body(code: str, message: str, status: int, shape: Shape = Shape.SIE) -> dict[str, Any]:
    if shape is Shape.OLLAMA:
        return {"error": message}
    answer: dict[str, Any] = {}
    if shape is not Shape.OPENAI:
        answer["detail"] = {"code": code, "message": message}
    if shape is not Shape.SIE:
        kind = "server_error" if status >= 500 else "invalid_request_error"
        answer["error"] = {"message": message, "type": kind, "param": None, "code": code.lower()}
    return answer


def error_body(exc: SIEError, shape: Shape = Shape.SIE) -> dict[str, Any]:
    if shape is Shape.TEI:
        answer: dict[str, Any] = tei_error(exc)[1].model_dump()
        return answer
    return body(exc.code.value, exc.message, exc.status, shape)


def error_status(exc: SIEError, shape: Shape = Shape.SIE) -> int:
    """The HTTP status of ``exc``'s answer: its own, except on TEI's paths, which answer TEI's."""
    return tei_error(exc)[0] if shape is Shape.TEI else exc.status


def retry_headers(retry_after: float | None) -> dict[str, str]:
    return {} if retry_after is None else {h.RETRY_AFTER: str(max(1, math.ceil(retry_after)))}


def error_headers(code: str, retry_after: float | None = None) -> dict[str, str]:
    return {h.ERROR_CODE: code, **retry_headers(retry_after)}


class RemoteError(SIEError):
    """An error answer relayed from elsewhere (a worker): its code, message and status kept."""

    def __init__(self, code: str, message: str, status: int, retry_after: float | None = None):
        super().__init__(message, status=status, retry_after=retry_after)
        try:
            self.code = ErrorCode(code)
        except ValueError:
            self.code = ErrorCode.INFERENCE_ERROR if status >= 500 else ErrorCode.INVALID_INPUT


def from_answer(status: int, headers: dict[str, str], payload: Any) -> SIEError:
    """The error an answer carries (either envelope), as an ``SIEError`` to raise again."""
    code, message = headers.get(h.ERROR_CODE, ""), ""
    if isinstance(payload, dict):
        detail = payload.get("detail") or payload.get("error") or {}
        if isinstance(detail, dict):
            code = code or str(detail.get("code", "")).upper()
            message = str(detail.get("message", ""))
        elif isinstance(detail, str):  # Ollama's shape
            message = detail
    code = code or (ErrorCode.INFERENCE_ERROR.value if status >= 500 else ErrorCode.INVALID_INPUT.value)
    retry = headers.get(h.RETRY_AFTER)
    return RemoteError(code, message or f"status {status}", status, float(retry) if retry else None)


def from_event(payload: dict[str, Any]) -> SIEError:
    """The error in a streamed answer's error event (which carries no HTTP status of its own)."""
    detail = payload.get("detail") or payload.get("error") or {}
    code = str(detail.get("code", "")).upper() if isinstance(detail, dict) else ""
    status = next((s for c, s in ERROR_STATUS.items() if c.value == code), 500)
    return from_answer(status, {}, payload)
