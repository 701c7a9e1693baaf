"""The soak's short version (issue 46, item 1; the long one is ``benchmarks/soak.py``): the same six
models in one real server (MiniLM encode and score, SmolLM2 generate, a tiny GLiNER, docling on a PDF with
a scanned page, PP-OCRv6 on a PNG, faster-whisper tiny.en on speech) take the soak's whole mix from three
clients for ``SECONDS``, disconnecting clients and bad requests included.

What it checks is behaviour, not speed: no 5xx, no dropped connection, no item answered with an error,
every kind of request answered at least once (the first requests cover each kind) and every bad request
refused with a 4xx. Latency and RSS depend on the CPU and stay in the benchmark."""

from __future__ import annotations

from pathlib import Path

from benchmarks.corpus import build_corpus
from benchmarks.soak import traffic
from benchmarks.soak_mix import HUNG_UP, KINDS, build_catalog, is_error, payloads, warm_up
from tests.helpers.server import offline_server

SECONDS = 45.0
CLIENTS = 3


def test_the_soak_mix_gets_no_error_every_kind_answered_and_every_bad_request_a_4xx(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    load = payloads(build_corpus(200, seed=46))
    catalog = build_catalog(tmp_path, gliner=tiny_models["gliner"])
    with offline_server(catalog, tmp_path) as server:
        warm_up(server.url, load)
        run = traffic(server, load, CLIENTS, SECONDS, seed=46)
        tail = server.tail()[-1500:]
    errors = [(r.kind, r.status) for r in run.records if is_error(r.status)]
    assert not errors, f"{errors[:20]}; server log: {tail}"
    answered = {
        r.kind
        for r in run.records
        if 200 <= r.status < 300 or (r.kind == "bad" and 400 <= r.status < 500) or r.status == HUNG_UP
    }
    assert answered == {kind for kind, _ in KINDS}, f"never answered: {sorted({k for k, _ in KINDS} - answered)}"
    bad = [r.status for r in run.records if r.kind == "bad"]
    assert bad and all(400 <= status < 500 for status in bad), bad
