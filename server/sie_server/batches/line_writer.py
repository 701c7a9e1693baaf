"""Finished batch lines written from a thread of their own, several to a transaction.

The event loop serves live calls; a commit there stalls every one of them for its length, and SQLite's
automatic WAL checkpoint, run by the commit that fills the log, writes and syncs megabytes (up to 549 ms
on this project's disks at 50,000 lines of 384-float vectors, one commit per line). Here the loop only
hands a line over and awaits its answer; a thread with its own connection commits what has queued up
(at most ``max_group`` lines a transaction), so a checkpoint costs a live call nothing. A line is still
recorded once, by its key, and is on disk before the runner counts it done.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading

from sie_server.batches.sqlite_store import Line, SqliteStore, record_lines

_Pending = tuple[Line, asyncio.Future[bool], asyncio.AbstractEventLoop]


def _settle(future: asyncio.Future[bool], value: bool | BaseException) -> None:
    if future.done():  # its line's task was cancelled (the server is stopping)
        return
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(value)


class LineWriter:
    def __init__(self, store: SqliteStore, max_group: int = 256):
        self.store = store
        self.max_group = max_group
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    async def record(self, line: Line) -> bool:
        """Record a finished line; False when it was recorded already."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        with self._start:
            if self._thread is None:
                self.store.db  # noqa: B018 - the loop's connection opens the store (schema, lock) first
                self._thread = threading.Thread(target=self._run, name="batch-lines", daemon=True)
                self._thread.start()
        self._queue.put((line, future, loop))
        return await future

    def close(self) -> None:
        """Write what has queued up, then end the thread."""
        with self._start:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _run(self) -> None:
        db = self.store.connect()
        try:
            while True:
                first = self._queue.get()
                if first is None:
                    return
                group = [first]
                with contextlib.suppress(queue.Empty):
                    while len(group) < self.max_group:
                        item = self._queue.get_nowait()
                        if item is None:
                            self._queue.put(None)  # end after this group
                            break
                        group.append(item)
                self._write(db, group)
        finally:
            db.close()

    @staticmethod
    def _write(db: sqlite3.Connection, group: list[_Pending]) -> None:
        outcome: list[bool] | BaseException
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                outcome = record_lines(db, [line for line, _, _ in group])
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except Exception as exc:  # the disk is full, say: each line's task fails, and runs again at the next start
            outcome = exc
        for i, (_, future, loop) in enumerate(group):
            value = outcome if isinstance(outcome, BaseException) else outcome[i]
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(_settle, future, value)
