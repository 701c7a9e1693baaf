"""The one place where failures become HTTP answers, in the envelope the route's clients read
(``contract/envelope.py``): SIE's ``{"detail": {"code", "message"}}``, OpenAI's and Ollama's on theirs."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from sie_server.api.body import json_response
from sie_server.contract import envelope
from sie_server.errors import InferenceError, InvalidInput, SIEError

log = logging.getLogger(__name__)


def error_response(exc: SIEError, path: str) -> Response:
    shape = envelope.shape_for(path)
    headers = envelope.error_headers(exc.code.value, exc.retry_after)
    return json_response(envelope.error_body(exc, shape), envelope.error_status(exc, shape), headers)


async def _sie_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SIEError)
    return error_response(exc, request.url.path)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
    return error_response(InvalidInput(f"invalid request: {problems}"), request.url.path)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}; see the API reference at /docs"
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return error_response(InvalidInput(message, status=exc.status_code), request.url.path)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(InferenceError("internal error; see the server log"), request.url.path)


def install(app: FastAPI) -> None:
    app.add_exception_handler(SIEError, _sie_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
