"""OpenAI's Batch API: ``/v1/files`` (upload, read, delete) and ``/v1/batches`` (create, read, list,
cancel), in OpenAI's shapes and errors. Each route reads the request and calls the ``BatchBackend``
the composition root put on ``app.state.batches`` (``batches/local.py`` on one server)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel

from sie_server.api.body import json_response, parse
from sie_server.api.keys import Access, bearer
from sie_server.api.openapi import doc
from sie_server.api.upload import StreamedUpload
from sie_server.batches.backend import BatchBackend, Owner
from sie_server.contract.batch_wire import (
    FILE_PURPOSE,
    Batch,
    BatchList,
    CreateBatchRequest,
    FileDeleted,
    FileList,
    FileObject,
)
from sie_server.errors import InvalidInput, PayloadTooLarge

router = APIRouter(tags=["batches"])
ERRORS = (400, 404, 413)
MULTIPART_SLACK = 64 * 1024  # a form's boundaries and fields around the file
BINARY = {"type": "string", "format": "binary"}
UPLOAD_DOC = doc(FileObject, openai=True, msgpack=False, errors=ERRORS)
UPLOAD_DOC["openapi_extra"]["requestBody"] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {"purpose": {"type": "string", "enum": ["batch"]}, "file": BINARY},
                "required": ["purpose", "file"],
            }
        }
    },
}
CONTENT_DOC = doc(None, openai=True, msgpack=False, errors=(404,))
CONTENT_DOC["responses"][200] = {
    "description": "the file's bytes (JSONL)",
    "content": {"application/octet-stream": {"schema": BINARY}},
}


def answer(model: BaseModel) -> Response:
    """OpenAI's spec types these fields as present or absent, never null: an unset one is left out."""
    return json_response(model.model_dump(mode="json", exclude_none=True))


def backend(request: Request) -> BatchBackend:
    found: BatchBackend | None = getattr(request.app.state, "batches", None)
    if found is None:
        raise InvalidInput("the Batch API is not served here", status=501)
    return found


def owner(request: Request) -> Owner:
    """The caller as the owner of what it makes: derived from its key (an admin key sees everything)."""
    access: Access | None = getattr(request.app.state, "access", None)
    if access is None or not access.enabled:
        return Owner()
    headers = {k.lower(): v for k, v in request.headers.raw}
    verdict = access.check("POST", request.url.path, headers)
    token = bearer(headers)
    return Owner.of_key(token, admin=bool(verdict.caller and verdict.caller.startswith("admin-")))


@router.post("/v1/files", **UPLOAD_DOC)
async def create_file(request: Request) -> Response:
    """Upload a JSONL batch input file (multipart: ``purpose=batch`` then ``file``); over
    ``--batch-max-file-bytes`` it is refused with 413 while it is read, and nothing is kept."""
    store = backend(request)
    cap = getattr(request.app.state, "batch_max_file_bytes", None)
    declared = request.headers.get("content-length")
    if cap is not None and declared and declared.isdigit() and int(declared) > cap + MULTIPART_SLACK:
        raise PayloadTooLarge(f"the upload is {declared} bytes; the limit is {cap} (--batch-max-file-bytes)")
    upload = StreamedUpload(request)
    caller = owner(request)
    purpose = (await upload.fields()).get("purpose")  # OpenAI's client sends it after the file
    made = await store.create_file(caller, upload.filename or "upload", purpose or FILE_PURPOSE, upload.file_chunks())
    purpose = purpose or (await upload.rest()).get("purpose")
    if purpose != FILE_PURPOSE:
        await store.delete_file(caller, made.id)
        raise InvalidInput(f"purpose {purpose!r} is not served here; upload batch input with purpose=batch")
    return answer(made)


@router.get("/v1/files", **doc(FileList, openai=True, msgpack=False, errors=(400,)))
async def list_files(
    request: Request,
    purpose: str | None = None,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 10_000,
) -> Response:
    return answer(await backend(request).list_files(owner(request), after, limit, purpose))


@router.get("/v1/files/{file_id}", **doc(FileObject, openai=True, msgpack=False, errors=(404,)))
async def get_file(request: Request, file_id: str) -> Response:
    return answer(await backend(request).get_file(owner(request), file_id))


@router.get("/v1/files/{file_id}/content", response_class=StreamingResponse, **CONTENT_DOC)
async def file_content(request: Request, file_id: str) -> Response:
    """An input file as uploaded; an output or error file: one line per finished request, in input order."""
    chunks = await backend(request).file_content(owner(request), file_id)
    return StreamingResponse(chunks, media_type="application/octet-stream")


@router.delete("/v1/files/{file_id}", **doc(FileDeleted, openai=True, msgpack=False, errors=(404,)))
async def delete_file(request: Request, file_id: str) -> Response:
    return answer(await backend(request).delete_file(owner(request), file_id))


@router.post("/v1/batches", **doc(Batch, body=CreateBatchRequest, openai=True, msgpack=False, errors=ERRORS))
async def create_batch(request: Request) -> Response:
    """Run every line of an uploaded file at the batch priority, beside live calls."""
    body = await parse(request, CreateBatchRequest, 1 * 2**20)
    return answer(await backend(request).create_batch(owner(request), body))


@router.get("/v1/batches", **doc(BatchList, openai=True, msgpack=False, errors=(400,)))
async def list_batches(
    request: Request, after: str | None = None, limit: Annotated[int, Query(ge=1, le=100)] = 20
) -> Response:
    """Newest first; ``after`` a batch id pages on."""
    return answer(await backend(request).list_batches(owner(request), after, limit))


@router.get("/v1/batches/{batch_id}", **doc(Batch, openai=True, msgpack=False, errors=(404,)))
async def get_batch(request: Request, batch_id: str) -> Response:
    return answer(await backend(request).get_batch(owner(request), batch_id))


@router.post("/v1/batches/{batch_id}/cancel", **doc(Batch, openai=True, msgpack=False, errors=(404, 409)))
async def cancel_batch(request: Request, batch_id: str) -> Response:
    """Stop taking lines; the batch ends ``cancelled`` with the lines finished kept."""
    return answer(await backend(request).cancel_batch(owner(request), batch_id))
