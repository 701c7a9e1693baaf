"""The tasks' own parts without a server: passages keep their offsets, placeholders stay consistent, the
package calls only the service, and a model that cannot load stops a task before any step runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import sie_server
from sie_server.catalog.info import catalog_info
from sie_server.catalog.loader import parse_config_file
from sie_server.contract.headers import call_options
from sie_server.contract.limits import Limits
from sie_server.contract.state_wire import GatewayModelInfo
from sie_server.contract.tasks_wire import AnswerQuestionsRequest
from sie_server.errors import ModelLoadFailed
from sie_server.tasks import answer_questions
from sie_server.tasks.common import chunks
from sie_server.tasks.pdf_pages import count
from sie_server.tasks.redact_pii import KNOWN, MODEL, PATTERN, Span, redact
from tests.helpers.catalog import real_config_path
from tests.server.test_layers import offenders

RERANK = "cross-encoder/ms-marco-MiniLM-L-6-v2"


def test_passages_keep_their_offsets_and_size() -> None:
    text = "First sentence here. Second one is a little longer!\n\nA new paragraph? " + "word " * 80 + "end."
    found = chunks(2, text, 100)
    assert all(c.document == 2 and text[c.start : c.end] == c.text and len(c.text) <= 100 for c in found)
    assert found[0].text == "First sentence here. Second one is a little longer!\n\nA new paragraph?"  # merged
    assert "".join("".join(c.text.split()) for c in found) == "".join(text.split())  # nothing lost


def test_placeholders_are_consistent_and_the_first_finding_wins() -> None:
    text = "Ann Lee and ann lee met Bo. Mail ann@x.org."
    spans = [
        Span(0, 7, "person", KNOWN),
        Span(12, 19, "person", KNOWN),
        Span(0, 11, "organization", MODEL),  # overlaps a known name: dropped
        Span(24, 26, "person", MODEL),
        Span(33, 42, "email", PATTERN),
    ]
    assert redact(text, spans) == (
        "[PERSON_1] and [PERSON_1] met [PERSON_2]. Mail [EMAIL_1].",
        {"PERSON": 2, "EMAIL": 1},
    )


def test_a_pdf_page_count_is_read_without_parsing() -> None:
    assert count(b"%PDF-1.4 << /Type /Pages /Kids [4 0 R] /Count 120 >> << /Type /Page >>").pages == 120
    assert count(b"%PDF-1.4 << /Type /Page >> << /Type /Page >> << /Type /Pages >>").pages == 2


def test_tasks_import_neither_the_engine_nor_the_adapters_nor_the_queue() -> None:
    forbidden = ("sie_server.engine", "sie_server.memory", "sie_server.adapters", "sie_server.cluster")
    assert Path(sie_server.__file__).parent.joinpath("tasks").is_dir()
    assert offenders("tasks", forbidden) == []


class Recorder:
    """A Service that knows the shipped catalog's models (all cached but the default reranker) and records every
    work call (none must come)."""

    limits = Limits()

    def __init__(self) -> None:
        self.work: list[str] = []

    def resolve(self, model_id: str) -> Any:
        return parse_config_file(real_config_path(model_id))

    async def model(self, config: Any) -> Any:
        return SimpleNamespace(state="available", available_offline=config.id != RERANK, last_error=None)

    def __getattr__(self, name: str) -> Any:
        async def work(*args: Any) -> None:
            self.work.append(name)
            raise AssertionError(f"{name} ran")

        return work


def test_a_model_that_cannot_load_stops_the_task_before_any_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    service = Recorder()
    request = AnswerQuestionsRequest(documents=[{"text": "Acme sells widgets."}], questions=["Who sells widgets?"])
    with pytest.raises(ModelLoadFailed) as failed:
        asyncio.run(answer_questions.run(service, request, call_options({})))  # type: ignore[arg-type]
    assert f"sie-server models pull {RERANK}" in failed.value.message and "rerank step" in failed.value.message
    assert service.work == []


class OnAGateway(Recorder):
    """What a gateway says of a model: the catalog's facts and its own cache, overlaid by a worker's report."""

    def __init__(self, report: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.report = report or {}

    async def model(self, config: Any) -> Any:
        facts = {**catalog_info(config).model_dump(), "available_offline": False, **self.report}
        return GatewayModelInfo(**facts, pool="default", workers=1, loaded_on=0)


def test_on_a_gateway_its_own_cache_does_not_stop_a_task_but_a_worker_s_failed_load_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gateway's offline flag and cache say nothing of its workers'; what a worker reports does."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    request = AnswerQuestionsRequest(documents=[{"text": "Acme sells widgets."}], questions=["Who sells widgets?"])
    service = OnAGateway()
    with pytest.raises(AssertionError, match="encode ran"):  # past the check, on to the first step
        asyncio.run(answer_questions.run(service, request, call_options({})))  # type: ignore[arg-type]
    failed = OnAGateway({"state": "failed", "last_error": "not cached and offline"})
    with pytest.raises(ModelLoadFailed) as refused:
        asyncio.run(answer_questions.run(failed, request, call_options({})))  # type: ignore[arg-type]
    assert "not cached and offline" in refused.value.message and failed.work == []
