"""The one place where failures become HTTP answers: ``{"detail": {"code", "message"}}``."""

from __future__ import annotations

import logging
import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from sie_server.api.codec import json_response
from sie_server.errors import ErrorCode, SIEError

log = logging.getLogger(__name__)
ERROR_CODE_HEADER = "X-SIE-Error-Code"


def error_response(code: str, message: str, status: int, retry_after: float | None = None) -> Response:
    headers = {ERROR_CODE_HEADER: code}
    if retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(retry_after)))
    return json_response({"detail": {"code": code, "message": message}}, status, headers)


async def _sie_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SIEError)
    return error_response(exc.code.value, exc.message, exc.status, exc.retry_after)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
    return error_response(ErrorCode.INVALID_INPUT.value, f"invalid request: {problems}", 400)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}; see the API reference in the README"
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return error_response(ErrorCode.INVALID_INPUT.value, message, exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(ErrorCode.INFERENCE_ERROR.value, "internal error; see the server log", 500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(SIEError, _sie_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
