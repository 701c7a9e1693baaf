"""Streaming into and out of a JetStream object store, a chunk at a time.

nats-py's ``ObjectStore.put`` reads from a synchronous reader and its ``get`` gathers the whole object
in memory; a batch's files are uploaded from an HTTP body and written line by line, and read back
as a download, so this module writes and reads the object store's own layout (chunks on
``$O.<bucket>.C.<nuid>``, one rolled-up meta message on ``$O.<bucket>.M.<name>``) as it goes: an
object written here is read by any NATS client, and the reverse.
"""

from __future__ import annotations

import base64
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from hashlib import sha256
from typing import Any

from sie_server.cluster import streams

CHUNK_BYTES = 128 * 1024  # the object store's default chunk size


def chunk_bytes(nc: Any) -> int:
    """Chunks that fit in one message on this connection."""
    return max(1024, min(CHUNK_BYTES, int(nc.max_payload) - streams.HEADER_ROOM))


class ObjectWriter:
    """One object written as its bytes come: chunks go out whenever a chunk's worth is buffered; ``close``
    publishes the meta message (the object exists only from then on), ``abort`` drops what was sent."""

    def __init__(self, js: Any, bucket: str, name: str, *, chunk: int) -> None:
        self.js, self.bucket, self.name, self.chunk = js, bucket, name, chunk
        self.nuid = uuid.uuid4().hex
        self.size = 0
        self._chunks = 0
        self._buffer = bytearray()
        self._digest = sha256()

    @property
    def _chunk_subject(self) -> str:
        return f"$O.{self.bucket}.C.{self.nuid}"

    async def write(self, data: bytes) -> None:
        self._buffer += data
        while len(self._buffer) >= self.chunk:
            await self._send(bytes(self._buffer[: self.chunk]))
            del self._buffer[: self.chunk]

    async def _send(self, part: bytes) -> None:
        self._digest.update(part)
        await self.js.publish(self._chunk_subject, part)
        self._chunks += 1
        self.size += len(part)

    async def close(self) -> int:
        """Publish what is left and the meta message; the object's size."""
        from nats.js.api import ObjectInfo, ObjectMetaOptions
        from nats.js.errors import NotFoundError

        if self._buffer:
            await self._send(bytes(self._buffer))
            self._buffer.clear()
        store = await self.js.object_store(self.bucket)
        try:
            before = await store.get_info(self.name)
        except NotFoundError:
            before = None
        info = ObjectInfo(
            name=self.name, bucket=self.bucket, nuid=self.nuid, size=self.size, chunks=self._chunks,
            mtime=datetime.now(UTC).isoformat(), options=ObjectMetaOptions(max_chunk_size=self.chunk),
            digest="SHA-256=" + base64.urlsafe_b64encode(self._digest.digest()).decode(),
        )  # fmt: skip
        meta = f"$O.{self.bucket}.M.{base64.urlsafe_b64encode(self.name.encode()).decode()}"
        await self.js.publish(meta, json.dumps(info.as_dict()).encode(), headers={"Nats-Rollup": "sub"})
        if before is not None and not before.deleted and before.nuid != self.nuid:  # a rewrite: the old chunks go
            with contextlib.suppress(Exception):
                await self.js.purge_stream(f"OBJ_{self.bucket}", subject=f"$O.{self.bucket}.C.{before.nuid}")
        return self.size

    async def abort(self) -> None:
        with contextlib.suppress(Exception):
            await self.js.purge_stream(f"OBJ_{self.bucket}", subject=self._chunk_subject)


async def read_object(js: Any, bucket: str, name: str) -> AsyncIterator[bytes]:
    """The object's chunks in order (its meta must have been checked to exist); raises if the bytes
    read do not match the digest its meta names."""
    from nats.js.errors import NotFoundError

    store = await js.object_store(bucket)
    try:
        info = await store.get_info(name)
    except NotFoundError:
        return
    if not info.size:
        return
    digest = sha256()
    sub = await js.subscribe(f"$O.{bucket}.C.{info.nuid}", ordered_consumer=True)
    try:
        async for msg in sub.messages:
            digest.update(msg.data)
            yield msg.data
            if msg.metadata.num_pending == 0:
                break
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
    expected = base64.urlsafe_b64decode((info.digest or "").removeprefix("SHA-256="))
    if digest.digest() != expected:
        raise OSError(f"object {name} in {bucket} does not match its digest")


async def read_lines(js: Any, bucket: str, name: str) -> AsyncIterator[bytes]:
    """The object's lines (without their line ends), read a chunk at a time."""
    rest = bytearray()
    async for chunk in read_object(js, bucket, name):
        start = 0
        end = chunk.find(b"\n")
        while end >= 0:
            rest += chunk[start:end]
            yield bytes(rest).removesuffix(b"\r")
            rest.clear()
            start, end = end + 1, chunk.find(b"\n", end + 1)
        rest += chunk[start:]
    if rest:
        yield bytes(rest).removesuffix(b"\r")
