"""A multipart upload read as it arrives: the form's fields before the file, then the file's bytes
part by part, so a store can refuse an upload past its cap while it is read, not after.

(Starlette's ``request.form()`` reads the whole body to a spooled file before returning.)
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from sie_server.errors import InvalidInput

MAX_FIELD_BYTES = 64 * 1024


@dataclass
class _Part:
    name: str = ""
    filename: str | None = None
    data: bytearray = field(default_factory=bytearray)


class StreamedUpload:
    """``await fields()`` reads up to the file part (``file_field``); ``file_chunks()`` then yields its bytes."""

    def __init__(self, request: Request, file_field: str = "file"):
        content_type, options = parse_options_header(request.headers.get("content-type", ""))
        boundary = options.get(b"boundary")
        if content_type != b"multipart/form-data" or not boundary:
            raise InvalidInput("send the file as multipart/form-data (fields purpose and file)")
        self.stream = request.stream().__aiter__()
        self.file_field = file_field
        self.events: collections.deque[tuple[str, bytes]] = collections.deque()
        self.header_name = b""
        self.header_value = b""
        self.headers: dict[bytes, bytes] = {}
        self.parser = MultipartParser(
            boundary,
            {
                "on_part_begin": lambda: self.headers.clear(),
                "on_header_field": lambda d, s, e: self._header_field(d[s:e]),
                "on_header_value": lambda d, s, e: self._header_value(d[s:e]),
                "on_header_end": self._header_end,
                "on_headers_finished": lambda: self.events.append(
                    ("part", self.headers.get(b"content-disposition", b""))
                ),
                "on_part_data": lambda d, s, e: self.events.append(("data", bytes(d[s:e]))),
                "on_part_end": lambda: self.events.append(("end", b"")),
            },
        )
        self.current = _Part()
        self.filename: str | None = None
        self.form: dict[str, str] = {}
        self.done = False

    def _header_field(self, data: bytes) -> None:
        self.header_name += data

    def _header_value(self, data: bytes) -> None:
        self.header_value += data

    def _header_end(self) -> None:
        self.headers[self.header_name.lower()] = self.header_value
        self.header_name, self.header_value = b"", b""

    async def _event(self) -> tuple[str, bytes] | None:
        while not self.events:
            if self.done:
                return None
            try:
                chunk = await self.stream.__anext__()
            except StopAsyncIteration:
                self._parse(None)
                self.done = True
                continue
            self._parse(chunk)
        return self.events.popleft()

    def _parse(self, chunk: bytes | None) -> None:
        """Feed the parser (``None``: the body has ended); a body that is not multipart is the caller's error."""
        try:
            if chunk is None:
                self.parser.finalize()
            else:
                self.parser.write(chunk)
        except FormParserError as exc:
            raise InvalidInput(f"the multipart/form-data body is malformed ({exc})") from None

    @staticmethod
    def _begin(disposition: bytes) -> _Part:
        _, options = parse_options_header(disposition)
        name = options.get(b"name", b"").decode("utf-8", "replace")
        filename = options.get(b"filename")
        return _Part(name, filename.decode("utf-8", "replace") if filename is not None else None)

    async def fields(self) -> dict[str, str]:
        """The fields sent before the file; InvalidInput when there is no file part."""
        if await self._fields_until_file():
            return self.form
        raise InvalidInput(f"the form has no {self.file_field!r} part")

    async def rest(self) -> dict[str, str]:
        """Every field, those after the file too (read after ``file_chunks()``)."""
        await self._fields_until_file()
        return self.form

    async def _fields_until_file(self) -> bool:
        while (event := await self._event()) is not None:
            kind, data = event
            if kind == "part":
                self.current = self._begin(data)
                if self.current.name == self.file_field:
                    self.filename = self.current.filename or "upload"
                    return True
            elif kind == "data":
                self.current.data += data
                if len(self.current.data) > MAX_FIELD_BYTES:
                    raise InvalidInput(f"form field {self.current.name!r} is over {MAX_FIELD_BYTES} bytes")
            elif kind == "end" and self.current.name:
                self.form[self.current.name] = self.current.data.decode("utf-8", "replace")
        return False

    async def file_chunks(self) -> AsyncIterator[bytes]:
        """The file's bytes as they arrive (after ``fields()``)."""
        while (event := await self._event()) is not None:
            kind, data = event
            if kind == "data" and data:
                yield data
            elif kind == "end":
                return
