"""``sie-server bench`` against a real server: the figures a user sizes a machine with."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from sie_server.tools.bench import corpus
from tests.cli.conftest import EMBEDDER, RERANKER, CliServer
from tests.helpers.metrics import scrape
from tests.helpers.server import pythonpath


def bench(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sie_server.cli", "bench", *args, "--url", url]
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def requests_counted(url: str, model: str, task: str) -> float:
    return scrape(url, "sie_requests_total", absent_as_zero=True, model=model, task=task, status="ok")


def test_bench_sends_n_texts_and_prints_throughput_latency_and_padding(cli_server: CliServer) -> None:
    done = bench(cli_server.url, EMBEDDER, "--texts", "40", "--concurrency", "4", "--seed", "7")

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"{EMBEDDER}: encode, 40 texts sent, 0 failed, concurrency 4" in out
    assert re.search(r"throughput: \d+\.\d texts/s over \d+\.\d\d s", out), out
    assert re.search(r"latency: p50 \d+\.\d ms  p90 \d+\.\d ms  p99 \d+\.\d ms", out), out
    ratio = re.search(r"padding ratio: (\d+\.\d+)", out)
    assert ratio is not None and float(ratio.group(1)) >= 1.0, out


def test_a_reranker_is_benched_on_score_and_the_server_saw_every_text(cli_server: CliServer) -> None:
    before = requests_counted(cli_server.url, RERANKER, "score")

    done = bench(cli_server.url, RERANKER, "--texts", "12", "--concurrency", "3")

    assert done.returncode == 0, done.stderr
    assert f"{RERANKER}: score, 12 texts sent, 0 failed" in done.stdout
    assert requests_counted(cli_server.url, RERANKER, "score") - before == 12 + 1  # the texts and the warm-up


def test_the_corpus_is_seeded_and_varied() -> None:
    texts = corpus(50, seed=3)
    assert texts == corpus(50, seed=3) and texts != corpus(50, seed=4)
    lengths = [len(t.split()) for t in texts]
    assert min(lengths) < 16 and max(lengths) > 64


def test_an_unknown_model_is_one_line(cli_server: CliServer) -> None:
    done = bench(cli_server.url, "test/no-such-model", "--texts", "2")

    assert done.returncode == 1
    assert done.stderr.strip() == "sie-server: bench test/no-such-model: the server does not serve test/no-such-model"
