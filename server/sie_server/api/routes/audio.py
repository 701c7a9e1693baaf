"""OpenAI ``POST /v1/audio/transcriptions``: its multipart form onto ``extract`` on a speech model.

The form's ``file`` is the audio (one file); ``model``, ``language``, ``prompt``, ``temperature``,
``response_format`` (json, text, verbose_json, srt, vtt) and ``timestamp_granularities[]`` are
OpenAI's fields; other fields its clients send (``stream``, ``include[]``, ``chunking_strategy``) are
accepted and not used. The whole body counts against ``--max-body-bytes`` (413 past it): the file
travels as it is (no base64), so the limit is the file's size plus a few hundred bytes of form.
An item error (audio that is not audio, too long) is this request's error: one file, one answer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from sie_server.api.body import json_response
from sie_server.api.context import call, model_for, service
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.contract.envelope import RemoteError
from sie_server.contract.requests import AudioIn, ExtractParams, ExtractRequest, ItemIn
from sie_server.contract.wire import ShownSparse
from sie_server.errors import ERROR_STATUS, InvalidInput, PayloadTooLarge

router = APIRouter(tags=["compatible"])
FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
MAX_FIELD_BYTES = 64 * 1024  # a prompt and the small fields; the file has the body limit


class Transcription(BaseModel):
    text: str


class TranscriptionWord(BaseModel):
    word: str
    start: float
    end: float


class TranscriptionSegment(BaseModel):
    id: int
    seek: int = 0
    start: float
    end: float
    text: str
    tokens: list[int] = Field(default_factory=list)
    temperature: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0


class TranscriptionVerbose(ShownSparse):
    """OpenAI's verbose_json: ``words`` only when ``timestamp_granularities[]`` asks for word (its spec has
    ``words`` an array, never null); ``language`` always a string (empty where the model did not say)."""

    task: Literal["transcribe"] = "transcribe"
    language: str
    duration: float
    text: str
    segments: list[TranscriptionSegment]
    words: list[TranscriptionWord] | None = None


async def _limited(request: Request, max_bytes: int) -> AsyncGenerator[bytes, None]:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"request body is {int(declared)} bytes; the limit is {max_bytes} (--max-body-bytes)")
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge(f"request body exceeds the limit of {max_bytes} bytes (--max-body-bytes)")
        yield chunk


async def read_form(request: Request, max_bytes: int) -> FormData:
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidInput("send a multipart/form-data body with the audio in its 'file' field")
    parser = MultiPartParser(request.headers, _limited(request, max_bytes), max_files=8, max_fields=64,
                             max_part_size=MAX_FIELD_BYTES)  # fmt: skip
    try:
        return await parser.parse()
    except MultiPartException as exc:
        raise InvalidInput(f"the multipart form does not parse: {exc.message}") from None


def _field(form: FormData, name: str) -> str | None:
    values = form.getlist(name)
    if len(values) > 1:
        raise InvalidInput(f"{name}: given {len(values)} times; give it once")
    if not values:
        return None
    if not isinstance(values[0], str):
        raise InvalidInput(f"{name}: must be a form field, not a file")
    return values[0]


async def _file(form: FormData) -> UploadFile:
    files = [v for v in form.getlist("file") if isinstance(v, UploadFile)]
    others = [k for k, v in form.multi_items() if isinstance(v, UploadFile) and k != "file"]
    if others:
        raise InvalidInput(f"{others[0]}: a file in a field other than 'file'; send one audio file as 'file'")
    if len(files) > 1:
        raise InvalidInput(f"file: {len(files)} files were sent; send one audio file per request")
    if not files:
        raise InvalidInput("file: the form has no file; send the audio as the multipart field 'file'")
    return files[0]


def _options(form: FormData) -> tuple[str, dict[str, Any]]:
    response_format = _field(form, "response_format") or "json"
    if response_format not in FORMATS:
        raise InvalidInput(f"response_format: {response_format!r} is not one of {', '.join(FORMATS)}")
    options: dict[str, Any] = {}
    if language := _field(form, "language"):
        options["language"] = language
    if prompt := _field(form, "prompt"):
        options["prompt"] = prompt
    if (temperature := _field(form, "temperature")) is not None:
        try:
            options["temperature"] = float(temperature)
        except ValueError:
            raise InvalidInput(f"temperature: {temperature!r} is not a number") from None
    granularities = form.getlist("timestamp_granularities[]") + form.getlist("timestamp_granularities")
    if granularities:
        options["timestamp_granularities"] = [str(g) for g in granularities]
    return response_format, options


FORM = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", "model"],
                    "properties": {
                        "file": {
                            "type": "string",
                            "format": "binary",
                            "description": "wav, flac, mp3, ogg, webm, m4a, aiff, or any container FFmpeg decodes",
                        },
                        "model": {"type": "string"},
                        "language": {"type": "string"},
                        "prompt": {"type": "string"},
                        "temperature": {"type": "number"},
                        "response_format": {"type": "string", "enum": list(FORMATS)},
                        "timestamp_granularities[]": {"type": "array", "items": {"enum": ["segment", "word"]}},
                    },
                }
            }
        },
    }
}
ROUTE_DOC = {**doc((Transcription, TranscriptionVerbose), openai=True, msgpack=False), "openapi_extra": FORM}


@router.post("/v1/audio/transcriptions", **ROUTE_DOC)
async def transcriptions(request: Request) -> Response:
    svc = service(request)
    form = await read_form(request, svc.limits.max_body_bytes)
    try:
        model = _field(form, "model")
        if not model:
            raise InvalidInput("model: the form has no model; name a speech model")
        config = model_for(request, model, "extract")
        if not config.accepts_audio:
            raise InvalidInput(f"model: {config.id} does not transcribe audio; it takes {', '.join(config.inputs)}")
        response_format, options = _options(form)
        upload = await _file(form)
        data = await upload.read()
        kind = (upload.filename or "").rsplit(".", 1)[-1].lower() if "." in (upload.filename or "") else None
    finally:
        await form.close()
    native = ExtractRequest(
        items=[ItemIn(id="file", audio=AudioIn(data=data, format=kind))], params=ExtractParams(options=options)
    )
    options_call = call(request)
    async with within(options_call):
        answer = await svc.extract(config, native, options_call)
    (item,) = answer.items
    if item.error is not None:
        codes = {code.value: status for code, status in ERROR_STATUS.items()}
        raise RemoteError(item.error.code, f"file: {item.error.message}", codes.get(item.error.code, 400))
    return _render(response_format, item.data or {})


def _clock(ms: int, separator: str) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{separator}{millis:03d}"


def _render(response_format: str, data: dict[str, Any]) -> Response:
    text = str(data.get("text", ""))
    segments = list(data.get("segments") or [])
    if response_format == "json":
        return json_response(Transcription(text=text))
    if response_format == "text":
        return Response(text + "\n", media_type="text/plain")
    if response_format == "srt":
        blocks = [
            f"{k}\n{_clock(s['start_ms'], ',')} --> {_clock(s['end_ms'], ',')}\n{s['text']}\n"
            for k, s in enumerate(segments, 1)
        ]
        return Response("\n".join(blocks), media_type="text/plain")
    if response_format == "vtt":
        cues = [f"{_clock(s['start_ms'], '.')} --> {_clock(s['end_ms'], '.')}\n{s['text']}\n" for s in segments]
        return Response("WEBVTT\n\n" + "\n".join(cues), media_type="text/vtt")
    words = data.get("words")
    verbose = TranscriptionVerbose(
        language=data.get("language") or "",
        duration=float(data.get("duration_ms", 0)) / 1000,
        text=text,
        segments=[
            TranscriptionSegment(id=k, start=s["start_ms"] / 1000, end=s["end_ms"] / 1000, text=s["text"])
            for k, s in enumerate(segments)
        ],
        words=None
        if words is None
        else [TranscriptionWord(word=w["text"], start=w["start_ms"] / 1000, end=w["end_ms"] / 1000) for w in words],
    )
    return json_response(verbose)
