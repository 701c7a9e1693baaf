"""The invoice question answered from a 3-document upload (the invoice PDF and two distractor PDFs):
``POST /v1/tasks/answer_questions`` in one call, against the same steps as separate requests from a client
(extract the three PDFs with docling, chunk on the client, embed the passages and the question, shortlist,
rerank, generate), each through the Python SDK on its JSON and its msgpack wire.

One server, offline: MiniLM (embedder and bi-encoder reranker) and SmolLM2-135M (GGUF), docling. Every
round runs both paths once, alternating which goes first; time is the wall clock of the whole answer,
bytes are every request's and answer's body and headers on the wire (an ``httpx`` transport that counts).

    .venv/bin/python -m benchmarks.task_qa [--rounds 5] [--threads 2] [--server-arg=--encode-cache=0]
"""

from __future__ import annotations

import argparse
import base64
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks._common import cpu_flags_line, cpu_model, load_line
from sie_sdk import SIEClient
from sie_server.tasks.answer_questions import NOT_FOUND, SYSTEM
from sie_server.tasks.common import chunks
from tests.helpers.catalog import DOCLING, MINILM, OCR, SMOLLM, copy_real
from tests.helpers.server import ServerProcess
from tests.tasks.helpers import CAFETERIA_TEXT, INVOICE_TEXT, MODELS, QUESTION, TRAVEL_TEXT, text_pdf

TOP_K, SHORTLIST, CHUNK_CHARS, MAX_NEW_TOKENS = 3, 12, 600, 96  # the task's defaults


@dataclass
class Counter(httpx.BaseTransport):
    """Counts request and answer bytes (request line, headers, body) through a real transport."""

    inner: httpx.HTTPTransport = field(default_factory=httpx.HTTPTransport)
    sent: int = 0
    received: int = 0
    calls: int = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        head = len(request.method) + len(str(request.url.raw_path)) + 12
        self.sent += head + sum(len(k) + len(v) + 4 for k, v in request.headers.raw) + len(request.content)
        self.received += 17 + sum(len(k) + len(v) + 4 for k, v in response.headers.raw) + len(response.content)
        self.calls += 1
        return response

    def close(self) -> None:
        self.inner.close()


def one_call(client: SIEClient, pdfs: list[bytes]) -> dict[str, Any]:
    documents = [{"file": {"data": base64.b64encode(p).decode(), "format": "pdf"}} for p in pdfs]
    body = {"documents": documents, "questions": [QUESTION], "models": MODELS}
    answer: dict[str, Any] = client.task("answer_questions", body)["answers"][0]
    return answer


def separate_calls(client: SIEClient, pdfs: list[bytes]) -> dict[str, Any]:
    parsed = client.extract(DOCLING, [{"document": {"data": p, "format": "pdf"}} for p in pdfs])
    texts = [str(item["data"]["text"]) for item in parsed]
    passages = [c for i, text in enumerate(texts) for c in chunks(i, text, CHUNK_CHARS)]
    vectors = np.stack([r["dense"] for r in client.encode(MINILM, [p.text for p in passages])])
    query = client.encode(MINILM, QUESTION, is_query=True)["dense"]
    nearest = np.argsort(-(vectors @ query), kind="stable")[:SHORTLIST]
    shortlist = [passages[int(k)] for k in nearest]
    ranked = client.score(MINILM, QUESTION, [{"id": str(i), "text": c.text} for i, c in enumerate(shortlist)])
    best = [(shortlist[int(s["item_id"])], s["score"]) for s in ranked["scores"][:TOP_K]]
    context = "\n\n".join(f"[{i + 1}] {c.text}" for i, (c, _) in enumerate(best))
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Passages:\n{context}\n\nQuestion: {QUESTION}"},
    ]
    text = client.generate(SMOLLM, messages=messages, max_new_tokens=MAX_NEW_TOKENS, temperature=0.0)["text"]
    used = [{"document": c.document, "start": c.start, "score": s} for c, s in best]
    return {"answer": text.strip(), "found": NOT_FOUND not in text.lower(), "passages": used}


def measure(url: str, wire: str, pdfs: list[bytes], rounds: int) -> dict[str, dict[str, float]]:
    paths = {"one task call": one_call, "separate requests": separate_calls}
    times: dict[str, list[float]] = {name: [] for name in paths}
    sizes: dict[str, tuple[int, int, int]] = {}
    answers: dict[str, Any] = {}
    for r in range(rounds + 1):  # round 0 warms every model and is not counted
        order = list(paths) if r % 2 else list(reversed(paths))
        for name in order:
            counter = Counter()
            with SIEClient(url, wire=wire, timeout=600, transport=counter) as client:  # type: ignore[arg-type]
                start = time.perf_counter()
                answers[name] = paths[name](client, pdfs)
                took = time.perf_counter() - start
            if r:
                times[name].append(took)
                sizes[name] = (counter.calls, counter.sent, counter.received)
    for name, found in answers.items():
        first = found["passages"][0]
        print(f"  {wire} {name}: first passage document {first['document']} at {first['start']}; {found['answer']!r}")
    return {
        name: {
            "median_s": statistics.median(times[name]),
            "min_s": min(times[name]),
            "calls": sizes[name][0],
            "sent": sizes[name][1],
            "received": sizes[name][2],
        }
        for name in paths
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--server-arg", action="append", default=[], help="passed to sie-server serve (e.g. --encode-cache=0)"
    )
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; {cpu_flags_line()}; {load_line()}")
    pdfs = [text_pdf(INVOICE_TEXT), text_pdf(TRAVEL_TEXT), text_pdf(CAFETERIA_TEXT)]
    with tempfile.TemporaryDirectory(prefix="sie-task-qa-") as tmp:
        catalog = Path(tmp) / "catalog"
        catalog.mkdir()
        for model in (MINILM, SMOLLM, DOCLING, OCR):
            copy_real(catalog, model)
        serve = ["--offline", "--threads", str(args.threads), *args.server_arg]
        server = ServerProcess(catalog, *serve, log=Path(tmp) / "server.log")
        try:
            server.wait_ready()
            results = {wire: measure(server.url, wire, pdfs, args.rounds) for wire in ("json", "msgpack")}
        finally:
            server.stop()
    print(f"\n{args.rounds} rounds (after one warm-up round), server: {' '.join(serve)}\n")
    print("| wire | path | HTTP calls | median s | min s | bytes sent | bytes received |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for wire, by_path in results.items():
        for name, r in by_path.items():
            print(
                f"| {wire} | {name} | {r['calls']:.0f} | {r['median_s']:.3f} | {r['min_s']:.3f} "
                f"| {r['sent']:,.0f} | {r['received']:,.0f} |"
            )
        one, many = by_path["one task call"], by_path["separate requests"]
        print(
            f"| {wire} | separate / one call | | {many['median_s'] / one['median_s']:.2f}x | "
            f"| {many['sent'] / one['sent']:.2f}x | {many['received'] / one['received']:.2f}x |"
        )


if __name__ == "__main__":
    main()
