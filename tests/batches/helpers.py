"""Building batch input files and waiting for batches, through the official ``openai`` client."""

from __future__ import annotations

import io
import json
from typing import Any

import openai
from openai.types import Batch

from tests.helpers.wait import wait_until

DONE = ("completed", "failed", "expired", "cancelled")


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def line(custom_id: str, url: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


def upload(client: openai.OpenAI, data: bytes, name: str = "input.jsonl") -> str:
    return client.files.create(file=(name, io.BytesIO(data)), purpose="batch").id


def finished(client: openai.OpenAI, batch_id: str, timeout: float = 60.0) -> Batch:
    def done() -> Batch | None:
        batch = client.batches.retrieve(batch_id)
        return batch if batch.status in DONE else None

    return wait_until(done, timeout=timeout, interval=0.1, message=f"batch {batch_id} never finished")


def run_batch(client: openai.OpenAI, lines: list[dict[str, Any]], endpoint: str, timeout: float = 60.0) -> Batch:
    file_id = upload(client, jsonl(lines))
    batch = client.batches.create(input_file_id=file_id, endpoint=endpoint, completion_window="24h")  # type: ignore[arg-type]
    return finished(client, batch.id, timeout)


def records(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    text = client.files.content(file_id).text
    return [json.loads(row) for row in text.splitlines() if row.strip()]
