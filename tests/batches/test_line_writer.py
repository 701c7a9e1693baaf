"""Finished lines recorded from the writer's thread: each once, counted in the same transaction, and a store
made before the counts table reads the same counts and bytes after an upgrade."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from sie_server.batches.line_writer import LineWriter
from sie_server.batches.sqlite_store import SqliteStore


def test_concurrent_lines_are_recorded_once_and_counted(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    writer = LineWriter(store, max_group=16)

    async def main() -> list[bool]:
        lines = [("b1", i % 150, i % 150 != 7, f'{{"i": {i % 150}}}'.encode()) for i in range(200)]
        return await asyncio.gather(*(writer.record(line) for line in lines))

    try:
        recorded = asyncio.run(main())
    finally:
        writer.close()
    assert sum(recorded) == 150  # 50 lines came twice: the second of each was refused by its key
    assert recorded[:150] == [True] * 150
    assert store.content_bytes("b1", True) == sum(len(f'{{"i": {i}}}') + 1 for i in range(150) if i != 7)
    assert store.content_bytes("b1", False) == len('{"i": 7}') + 1
    pages = b"".join(store.content_pages("b1", True)).splitlines()
    assert len(pages) == 149 and pages[0] == b'{"i": 0}' and pages[-1] == b'{"i": 149}'
    assert store.content_bytes("other", True) == 0
    store.close()


def test_a_store_from_before_the_counts_table_is_counted_on_open(tmp_path: Path) -> None:
    root = tmp_path / "batches"
    root.mkdir()
    old = sqlite3.connect(root / "batches.sqlite3", isolation_level=None)
    old.execute(
        "CREATE TABLE lines (batch_id TEXT NOT NULL, line_index INTEGER NOT NULL, ok INTEGER NOT NULL, "
        "record BLOB NOT NULL, PRIMARY KEY (batch_id, line_index)) WITHOUT ROWID"
    )
    old.executemany("INSERT INTO lines VALUES ('b1', ?, ?, ?)", [(i, int(i != 3), b"x" * 9) for i in range(5)])
    old.close()
    store = SqliteStore(tmp_path)
    assert store.content_bytes("b1", True) == 4 * 10 and store.content_bytes("b1", False) == 10
    assert store.record_line("b1", 5, True, b"y") and not store.record_line("b1", 0, True, b"y")
    assert store.content_bytes("b1", True) == 4 * 10 + 2
    store.close()
    again = SqliteStore(tmp_path)  # the upgrade runs once: reopening does not count the lines twice
    assert again.content_bytes("b1", True) == 4 * 10 + 2
    again.close()
