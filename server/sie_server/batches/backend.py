"""The Batch API's backend: what the files and batches routes call (``api/routes/batches.py``).

Two implementations: the single server's (``batches/local.py``: SQLite and an in-process runner)
and the cluster gateway's (``cluster/batch_*.py``: JetStream). Every method takes the caller's
``Owner``; an object another key made is ``NotFound``, exactly as if it did not exist, except to
an admin key, which sees every object.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from sie_server.contract.batch_wire import Batch, BatchList, CreateBatchRequest, FileDeleted, FileList, FileObject

ANONYMOUS = "anonymous"  # the one owner when the server has no keys


@dataclass(frozen=True)
class Owner:
    """Who made (or may see) a file or batch: a stable id derived from the key itself, so that
    reordering or adding keys hands nobody else's batches over; ``admin`` sees every owner's."""

    id: str = ANONYMOUS
    admin: bool = False

    @classmethod
    def of_key(cls, key: bytes | None, *, admin: bool = False) -> Owner:
        if not key:
            return cls(ANONYMOUS, admin)
        return cls("key-" + hashlib.sha256(b"sie-batch-owner:" + key).hexdigest()[:32], admin)

    def may_see(self, owner_id: str) -> bool:
        return self.admin or owner_id == self.id


@dataclass(frozen=True)
class Caps:
    """What one input file may hold: refused while it is read (bytes) or when a batch is made (lines)."""

    max_file_bytes: int = 200 * 10**6  # OpenAI's cap
    max_lines: int = 50_000  # OpenAI's cap
    max_line_bytes: int = 64 * 2**20  # a line's body: the server's body limit (contract/limits.py)


class BatchBackend(Protocol):
    async def create_file(self, owner: Owner, filename: str, purpose: str, chunks: AsyncIterator[bytes]) -> FileObject:
        """Store an upload read from ``chunks``; PayloadTooLarge (413) as soon as it passes the byte cap,
        with nothing kept; InvalidInput for a purpose other than ``batch``."""
        ...

    async def get_file(self, owner: Owner, file_id: str) -> FileObject: ...

    async def file_content(self, owner: Owner, file_id: str) -> AsyncIterator[bytes]:
        """The file's bytes in chunks (an output or error file: its lines in input order as recorded so far).
        NotFound is raised by the call itself, before any chunk."""
        ...

    async def delete_file(self, owner: Owner, file_id: str) -> FileDeleted: ...

    async def list_files(self, owner: Owner, after: str | None, limit: int, purpose: str | None) -> FileList: ...

    async def create_batch(self, owner: Owner, request: CreateBatchRequest) -> Batch:
        """A batch over an uploaded file: NotFound for a missing (or deleted) file; InvalidInput for a file
        that is not ``purpose=batch``, not JSONL, or over the line cap."""
        ...

    async def get_batch(self, owner: Owner, batch_id: str) -> Batch: ...

    async def list_batches(self, owner: Owner, after: str | None, limit: int) -> BatchList:
        """Newest first, ``limit`` at a time, from after the batch ``after`` (OpenAI's paging)."""
        ...

    async def cancel_batch(self, owner: Owner, batch_id: str) -> Batch:
        """Stop taking lines; the batch ends ``cancelled`` with its finished lines kept."""
        ...
