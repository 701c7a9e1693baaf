"""Offline means offline (issue 46, item 7): a server started with ``--offline`` and ``HF_HUB_OFFLINE=1``
makes no outbound connection, from its start to its stop, through one request of every kind with the
models that run offline (encode, score, entities, a document, OCR, speech, generate, a task, the OpenAI,
Ollama and TEI routes) and one request for a model it does not have (502 MODEL_LOAD_FAILED, not a download).

How it is watched: the server runs with a socket guard (tests/helpers/socket_guard/sitecustomize.py, first on
its PYTHONPATH) that refuses every Python connection, UDP send and name lookup to an address that is not
loopback and logs it with its stack; where strace can trace (``connect(2)`` through seccomp), every connect the
process makes, native code included, is logged too and checked for a non-loopback address. A network
namespace (``unshare -n``) would also keep native code in, but the test could not reach a server inside one
over TCP, and the server has no unix-socket listener.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.catalog import (
    DOCLING,
    MINILM,
    OCR,
    SMOLLM,
    WHISPER_TINY,
    copy_real,
    real_config,
    tiny_gliner,
    write_config,
)
from tests.helpers.documents import png, text_image
from tests.helpers.server import REPO, ServerProcess, free_port, pythonpath
from tests.helpers.speech import tone, wav
from tests.tasks.helpers import INVOICE_TEXT, text_pdf

GUARD = REPO / "tests" / "helpers" / "socket_guard"
UNCACHED = "cross-encoder/ms-marco-MiniLM-L-6-v2"  # in the catalog, in no package and not in the (empty) HF cache
GLINER = "test/tiny-gliner"
TRACE = ("strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=connect", "-e", "signal=none")
HIDING = ("ORT_DISABLE_TELEMETRY", "CI", "TF_BUILD", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "TRAVIS", "JENKINS_URL",
          "CODEBUILD_BUILD_ID", "BUILDKITE", "TEAMCITY_VERSION", "APPVEYOR", "BITBUCKET_BUILD_NUMBER")  # fmt: skip
ADDRESS = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"')


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def speech() -> bytes:
    return wav(tone(1.0), 16_000)


def traceable() -> bool:
    """Whether strace can trace a child here (it is installed and ptrace is allowed)."""
    if shutil.which("strace") is None:
        return False
    probe = subprocess.run([*TRACE, "-o", os.devnull, "true"], capture_output=True, check=False)
    return probe.returncode == 0


def guarded_env(home: Path, log: Path) -> dict[str, str]:
    return {
        "PYTHONPATH": os.pathsep.join([str(GUARD), pythonpath()]),
        "SIE_TEST_SOCKET_LOG": str(log),
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(home / "empty-hf-home"),
        "HOME": str(home),  # ONNX Runtime and the OCR packages write caches under it
    }


class GuardedServer(ServerProcess):
    """``sie-server serve`` under the socket guard, and under strace where it can trace."""

    def __init__(self, catalog: Path, logs: Path, *args: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = logs / "server.log"
        self.attempts = logs / "guard.jsonl"
        self.connects = logs / "connect.trace" if traceable() else None
        self._out = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        self._data = tempfile.TemporaryDirectory(prefix="sie-data-")  # what ServerProcess.stop() removes
        trace = [*TRACE, "-o", str(self.connects)] if self.connects is not None else []
        command = [*trace, sys.executable, "-m", "sie_server.cli", "serve", "--port", str(self.port),
                   "--models-dir", str(catalog), *args]  # fmt: skip
        # what would hide an attempt: ONNX Runtime sends no telemetry when it sees a CI, or its own switch set
        inherited = {k: v for k, v in os.environ.items() if k not in HIDING}
        env = {**inherited, **guarded_env(logs, self.attempts), "XDG_DATA_HOME": self._data.name}
        self.proc = subprocess.Popen(command, env=env, stdout=self._out, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        """Under strace, SIGTERM goes to the server itself (strace would only detach), then strace ends with it."""
        if self.connects is not None and self.proc.poll() is None:
            for pid in _children(self.proc.pid):
                os.kill(pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                for pid in _children(self.proc.pid):
                    os.kill(pid, signal.SIGKILL)
        super().stop()

    def guard_log(self) -> list[dict[str, Any]]:
        if not self.attempts.exists():
            return []
        return [json.loads(line) for line in self.attempts.read_text().splitlines()]

    def outbound_connects(self) -> list[str]:
        """connect(2) calls to an address that is not loopback, as strace saw them (none without strace)."""
        if self.connects is None or not self.connects.exists():
            return []
        found = []
        for line in self.connects.read_text().splitlines():
            match = ADDRESS.search(line)
            if match and not ipaddress.ip_address(match.group(1) or match.group(2)).is_loopback:
                found.append(line)
        return found


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_the_guard_catches_an_outbound_attempt(tmp_path: Path) -> None:
    """The guard itself: a process under it that tries to reach TEST-NET-1 is refused, and the try is logged."""
    log = tmp_path / "guard.jsonl"
    code = "import socket\ntry:\n    socket.socket().connect(('192.0.2.1', 80))\nexcept OSError as e:\n" \
           "    print(e.errno)\nsocket.getaddrinfo('example.com', 443)"  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code], env={**os.environ, **guarded_env(tmp_path, log)},
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.stdout.split()[0] == "101"  # ENETUNREACH, before any packet
    assert "socket guard" in run.stderr  # the lookup raised too
    calls = [json.loads(line)["call"] for line in log.read_text().splitlines()]
    assert calls == ["connect", "getaddrinfo"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Iterator[GuardedServer]:
    catalog = tmp_path_factory.mktemp("offline-catalog")
    for model in (MINILM, SMOLLM, DOCLING, OCR, UNCACHED):
        copy_real(catalog, model)
    whisper = real_config(WHISPER_TINY)
    whisper["tasks"]["extract"]["options"].update(beam_size=1, temperature=0.0)
    write_config(catalog, whisper)
    write_config(catalog, tiny_gliner(GLINER, tiny_models["gliner"]))
    logs = tmp_path_factory.mktemp("offline-logs")
    proc = GuardedServer(catalog, logs, "--offline", "--threads", "1", "--cpu-precision", "fp32")
    with proc:
        yield proc


CHAT = [{"role": "user", "content": "Say hello."}]
PDF = {"document": {"data": b64(text_pdf(INVOICE_TEXT)), "format": "pdf"}}
PICTURE = {"images": [{"data": b64(png(text_image(["Invoice 42"]))), "format": "png"}]}
QA = {
    "documents": [{"text": " ".join(INVOICE_TEXT)}],
    "questions": ["How much is due?"],
    "max_new_tokens": 8,
    "models": {"embed": MINILM, "rerank": MINILM, "generate": SMOLLM},
}
OLLAMA_CHAT = {"model": SMOLLM, "messages": CHAT, "stream": False, "options": {"temperature": 0, "num_predict": 4}}
# name: (path, JSON body, status); one POST of every kind
REQUESTS: dict[str, tuple[str, dict[str, Any], int]] = {
    "encode": (f"/v1/encode/{MINILM}", {"items": [{"text": "offline"}]}, 200),
    "score": (f"/v1/score/{MINILM}", {"query": {"text": "invoice"}, "items": [{"text": "a bill"}]}, 200),
    "entities": (f"/v1/extract/{GLINER}", {"items": [{"text": "Alice"}], "params": {"labels": ["person"]}}, 200),
    "document": (f"/v1/extract/{DOCLING}", {"items": [PDF]}, 200),
    "ocr": (f"/v1/extract/{OCR}", {"items": [PICTURE]}, 200),
    "speech": (f"/v1/extract/{WHISPER_TINY}", {"items": [{"audio": {"data": b64(speech()), "format": "wav"}}]}, 200),
    "generate": (f"/v1/generate/{SMOLLM}", {"prompt": "Hello", "max_new_tokens": 4, "temperature": 0}, 200),
    "task": ("/v1/tasks/answer_questions", QA, 200),
    "openai embeddings": ("/v1/embeddings", {"model": MINILM, "input": "offline"}, 200),
    "openai chat": ("/v1/chat/completions", {"model": SMOLLM, "messages": CHAT, "max_tokens": 4}, 200),
    "ollama embed": ("/api/embed", {"model": MINILM, "input": "offline"}, 200),
    "ollama chat": ("/api/chat", OLLAMA_CHAT, 200),
    "tei embed": ("/embed", {"inputs": "offline", "model": MINILM}, 200),
    "model not cached": (f"/v1/score/{UNCACHED}", {"query": {"text": "q"}, "items": [{"text": "a"}]}, 502),
}


def test_no_request_of_any_kind_reaches_out(server: GuardedServer) -> None:
    with httpx.Client(base_url=server.url, timeout=300) as client:
        for name, (path, body, status) in REQUESTS.items():
            r = client.post(path, json=body)
            assert r.status_code == status, f"{name}: {r.status_code} {r.text[:500]}"
            if status == 502:  # refused, not fetched, and said so
                assert r.headers["x-sie-error-code"] == "MODEL_LOAD_FAILED" and "offline" in r.text, r.text
        assert client.get("/v1/models").status_code == 200
        audio = {"file": ("note.wav", speech(), "audio/wav")}
        r = client.post("/v1/audio/transcriptions", data={"model": WHISPER_TINY}, files=audio)  # OpenAI's
        assert r.status_code == 200, r.text
    server.stop()  # its stop is watched too, and strace's log is complete once it has ended
    attempts = server.guard_log()
    assert not attempts, "outbound attempts:\n" + "\n".join(f"{a['call']} {a['target']}\n{''.join(a['stack'])}"
                                                              for a in attempts)  # fmt: skip
    assert not server.outbound_connects()
