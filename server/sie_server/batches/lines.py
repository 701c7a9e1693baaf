"""One input line of a batch: read and checked, run through the server's own routes, and the output
or error line OpenAI writes for it. The single server and the cluster both use this module.

A line is ``{"custom_id", "method": "POST", "url", "body"}``. Its ``url`` is the batch's endpoint
(for the native ones, ``/v1/encode|score|extract/{model}``). It runs through the server's own ASGI
app in-process at the ``batch`` priority, so it gets exactly the live route's validation, refusals
and answer; a line the app answers 2xx goes to the output file, any other to the error file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from sie_server.cluster.asgi_call import call_app
from sie_server.contract import headers as h
from sie_server.contract.batch_wire import url_fits
from sie_server.errors import ErrorCode, InvalidInput, PayloadTooLarge

MAX_CUSTOM_ID = 512


@dataclass(frozen=True)
class InputLine:
    """A line that may run: its place in the file (0-based), its id, where it goes and its body (JSON)."""

    index: int
    custom_id: str
    url: str
    body: bytes


@dataclass(frozen=True)
class LineProblem:
    """A line that cannot run; it gets an error line and the batch goes on."""

    index: int
    custom_id: str | None
    code: str
    message: str


@dataclass(frozen=True)
class LineResult:
    """A finished line: ``ok`` (output file) or not (error file), and its JSONL line without the newline."""

    index: int
    ok: bool
    record: bytes


class NotJsonl(ValueError):
    """The file is not JSON lines: a line that is not one JSON object (1-based ``line``)."""

    def __init__(self, line: int, reason: str):
        super().__init__(f"line {line} is not a JSON object ({reason}); a batch file is JSONL, one request a line")
        self.line = line


def split_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """The file's non-blank lines with their 0-based index among non-blank lines."""
    index = 0
    for raw in data.split(b"\n"):
        if raw.strip():
            yield index, raw
            index += 1


def check_json_line(raw: bytes, number: int) -> None:
    """NotJsonl unless ``raw`` is one JSON object (checked while an upload is read)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise NotJsonl(number, str(exc).split(":")[0]) from None
    if not isinstance(value, dict):
        raise NotJsonl(number, f"a JSON {type(value).__name__}")


class UploadCheck:
    """An input file checked as it is read: its size and line caps, and each line one JSON object.

    ``feed`` each chunk as it arrives (PayloadTooLarge past the byte cap, InvalidInput past the line
    cap, NotJsonl for a bad line); ``finish`` gives the number of lines (InvalidInput for none).
    """

    def __init__(self, max_bytes: int, max_lines: int):
        self.max_bytes, self.max_lines = max_bytes, max_lines
        self.size, self.lines, self._pending = 0, 0, b""

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise PayloadTooLarge(f"the file is over {self.max_bytes} bytes, the limit (--batch-max-file-bytes)")
        complete, _, self._pending = (self._pending + chunk).rpartition(b"\n")
        self._check(complete)

    def finish(self) -> int:
        self._check(self._pending)
        self._pending = b""
        if self.lines == 0:
            raise InvalidInput("the file has no lines; a batch file is JSONL, one request a line")
        return self.lines

    def _check(self, data: bytes) -> None:
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            self.lines += 1
            if self.lines > self.max_lines:
                raise InvalidInput(f"the file has over {self.max_lines} lines, the limit (--batch-max-lines)")
            check_json_line(raw, self.lines)


def parse_line(index: int, raw: bytes, endpoint: str, max_line_bytes: int, seen: set[str]) -> InputLine | LineProblem:
    """Check one line against its batch; ``seen`` holds the custom_ids before it (this one is added)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return LineProblem(index, None, "invalid_json_line", f"line {index + 1} is not valid JSON")
    if not isinstance(value, dict):
        return LineProblem(index, None, "invalid_json_line", f"line {index + 1} is not a JSON object")
    custom_id = value.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > MAX_CUSTOM_ID:
        shown = None if not isinstance(custom_id, str) else custom_id[:MAX_CUSTOM_ID]
        return LineProblem(index, shown, "missing_custom_id", f"line {index + 1} needs a custom_id string")
    if custom_id in seen:
        return LineProblem(
            index, custom_id, "duplicate_custom_id", f"custom_id {custom_id!r} is used by an earlier line"
        )
    seen.add(custom_id)
    if len(raw) > max_line_bytes:
        message = f"line {index + 1} is {len(raw)} bytes; the limit is {max_line_bytes} per request"
        return LineProblem(index, custom_id, "request_too_large", message)
    method, url, body = value.get("method", "POST"), value.get("url"), value.get("body")
    if method != "POST":
        return LineProblem(index, custom_id, "invalid_method", f"method {method!r}: batch lines are POST")
    if not isinstance(url, str) or not url_fits(endpoint, url):
        message = f"url {url!r} does not belong to this batch's endpoint {endpoint}"
        return LineProblem(index, custom_id, "invalid_url", message)
    if not isinstance(body, dict):
        return LineProblem(index, custom_id, "invalid_body", "body must be a JSON object")
    if body.get("stream"):
        return LineProblem(index, custom_id, "invalid_body", "stream is not supported in a batch")
    return InputLine(index, custom_id, url, orjson.dumps(body))


def request_id(batch_id: str, index: int) -> str:
    """The same id for the same line however often the batch is resumed."""
    return "batch_req_" + hashlib.sha256(f"{batch_id}:{index}".encode()).hexdigest()[:24]


def problem_result(batch_id: str, problem: LineProblem) -> LineResult:
    record = {
        "id": request_id(batch_id, problem.index),
        "custom_id": problem.custom_id,
        "response": None,
        "error": {"code": problem.code, "message": problem.message},
    }
    return LineResult(problem.index, False, orjson.dumps(record))


def _error_of(status: int, body: Any) -> dict[str, str]:
    detail = body.get("error") or body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, dict):
        code = str(detail.get("code") or "").lower()
        return {"code": code or f"http_{status}", "message": str(detail.get("message") or f"status {status}")}
    if isinstance(detail, str):
        return {"code": f"http_{status}", "message": detail}
    return {"code": f"http_{status}", "message": f"the request answered status {status}"}


def answer_result(batch_id: str, line: InputLine, status: int, payload: bytes) -> LineResult:
    """The output line for an answer (an error line unless 2xx, with the error read from its body)."""
    rid = request_id(batch_id, line.index)
    try:
        body: Any = orjson.loads(payload) if payload else None
    except orjson.JSONDecodeError:
        body = payload.decode("utf-8", "replace")
    ok = 200 <= status < 300
    record = {
        "id": rid,
        "custom_id": line.custom_id,
        "response": {"status_code": status, "request_id": rid, "body": body},
        "error": None if ok else _error_of(status, body),
    }
    return LineResult(line.index, ok, orjson.dumps(record))


def internal_error(batch_id: str, line: InputLine) -> LineResult:
    """A line whose call failed outside the app's own error handling (logged by the caller)."""
    problem = LineProblem(line.index, line.custom_id, ErrorCode.INFERENCE_ERROR.value.lower(), "internal error")
    return problem_result(batch_id, problem)


async def run_line(app: Any, batch_id: str, line: InputLine, token: str | None) -> LineResult:
    """Run ``line`` through ``app`` (the server's own, or a worker's) at the batch priority.

    ``token``: the app's internal token (``X-SIE-Queue-Token``), which lets the call past the key check:
    the owner's key was checked when the batch was made, and no key is kept on disk.
    """
    headers = {h.CONTENT_TYPE: "application/json", h.PRIORITY: "batch", h.REQUEST_ID: request_id(batch_id, line.index)}
    if token:
        headers[h.QUEUE_TOKEN] = token
    response = await call_app(app, line.url, line.body, headers)
    payload = await response.read()
    return answer_result(batch_id, line, response.status, payload)
