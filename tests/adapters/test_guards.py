"""Guard verdict parsers on canned outputs of each format: safe, unsafe with the model's category names,
Qwen3Guard's controversial and refusal, granite's confidence and score tags; anything else is INVALID_OUTPUT
(a 502-class error of that item), never a guess."""

from __future__ import annotations

import pytest

from sie_server.adapters.guards import GUARDS, guard_format
from sie_server.catalog.schema import GuardFormat
from sie_server.errors import ERROR_STATUS, ErrorCode, InvalidOutput

QWEN, LLAMA, GRANITE = guard_format("qwen3guard"), guard_format("llama_guard"), guard_format("granite_guardian")


def test_every_format_the_schema_allows_has_its_parser() -> None:
    assert set(GUARDS) == set(GuardFormat.__args__)  # type: ignore[attr-defined]
    assert ERROR_STATUS[ErrorCode.INVALID_OUTPUT] == 502


@pytest.mark.parametrize(
    ("raw", "label", "categories", "extra"),
    [
        ("Safety: Safe\nCategories: None", "safe", [], {}),
        ("Safety: Unsafe\nCategories: Violent", "unsafe", ["Violent"], {}),
        ("Safety: Unsafe\nCategories: PII, Suicide & Self-Harm", "unsafe", ["PII", "Suicide & Self-Harm"], {}),
        (
            "Safety: Controversial\nCategories: Politically Sensitive Topics",
            "controversial",
            ["Politically Sensitive Topics"],
            {},
        ),
        ("Safety: Safe\nCategories: None\nRefusal: Yes", "safe", [], {"refusal": True}),
        (
            "Safety: Unsafe\nCategories: Non-violent Illegal Acts\nRefusal: No",
            "unsafe",
            ["Non-violent Illegal Acts"],
            {"refusal": False},
        ),
        ("<think>\n\n</think>\n\nSafety: Safe\nCategories: None", "safe", [], {}),
        ("Safety: Safe", "safe", [], {}),
    ],
)
def test_qwen3guard_verdicts(raw: str, label: str, categories: list[str], extra: dict[str, object]) -> None:
    verdict = QWEN.parse(raw)
    assert (verdict.label, list(verdict.categories), verdict.extra) == (label, categories, extra)
    assert verdict.classifications() == [{"label": label, "score": 1.0}] + [
        {"label": c, "score": 1.0} for c in categories
    ]


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "I cannot help with that.",
        "Safety: Maybe\nCategories: None",
        "Safety: Unsafe",  # unsafe without a category
        "Safety: Unsafe\nCategories: Violent, Fireworks",  # not one of the model's categories
        "Safety: Safe\nCategories: None\nThe user asked about",
        "the a an of to",
    ],
)
def test_qwen3guard_unreadable_is_invalid_output_quoting_the_text(raw: str) -> None:
    with pytest.raises(InvalidOutput) as caught:
        QWEN.parse(raw)
    assert caught.value.code is ErrorCode.INVALID_OUTPUT and caught.value.status == 502
    assert "not a qwen3guard verdict" in caught.value.message and repr(raw[:300]) in caught.value.message


def test_llama_guard_verdicts_use_the_taxonomy_names() -> None:
    assert LLAMA.parse("\n\nsafe").label == "safe" and LLAMA.parse("safe").categories == ()
    verdict = LLAMA.parse("\n\nunsafe\nS1,S10")
    assert verdict.label == "unsafe"
    assert [c["label"] for c in verdict.classifications()] == ["unsafe", "S1: Violent Crimes", "S10: Hate"]
    assert LLAMA.parse("unsafe\nS14").categories == ("S14: Code Interpreter Abuse",)


@pytest.mark.parametrize("raw", ["", "unsafe", "unsafe\nS99", "unsafe\nviolence", "Safe to say", "safe\nS1"])
def test_llama_guard_unreadable(raw: str) -> None:
    with pytest.raises(InvalidOutput, match="not a llama_guard verdict"):
        LLAMA.parse(raw)


def test_llama_guard_messages_are_content_parts_unless_the_config_says_strings() -> None:
    parts = LLAMA.messages("hi", "hello", {})
    assert parts == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    ]
    assert LLAMA.messages("hi", None, {"content_parts": False}) == [{"role": "user", "content": "hi"}]
    assert QWEN.messages("hi", "hello", {}) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]


@pytest.mark.parametrize(
    ("raw", "label", "extra"),
    [
        ("Yes", "unsafe", {"risk": "harm"}),  # 3.1
        ("No", "safe", {"risk": "harm"}),
        ("Yes\n<confidence> High </confidence>", "unsafe", {"risk": "harm", "confidence": "High"}),  # 3.2
        ("No\n<confidence> Low </confidence>", "safe", {"risk": "harm", "confidence": "Low"}),
        ("<score> yes </score>", "unsafe", {"risk": "harm"}),  # 3.3, thinking off
        ("<think>The prompt asks how to hurt someone.</think>\n<score> yes </score>", "unsafe", {"risk": "harm"}),
    ],
)
def test_granite_guardian_verdicts(raw: str, label: str, extra: dict[str, object]) -> None:
    verdict = GRANITE.parse(raw)
    assert (verdict.label, verdict.extra) == (label, extra)
    assert verdict.categories == (("harm",) if label == "unsafe" else ())


@pytest.mark.parametrize("raw", ["", "Maybe", "Yes, because", "<think>unfinished", "<score> perhaps </score>"])
def test_granite_guardian_unreadable(raw: str) -> None:
    with pytest.raises(InvalidOutput, match="not a granite_guardian verdict"):
        GRANITE.parse(raw)


def test_the_schema_takes_extract_on_a_causal_lm_only_as_a_guard() -> None:
    from pydantic import ValidationError

    from sie_server.catalog.schema import ModelConfig

    base: dict[str, object] = {
        "id": "test/guard",
        "source": {"path": "/nowhere"},
        "max_sequence_length": 64,
        "profiles": {"cpu": {}},
    }
    guard = ModelConfig.model_validate(
        {**base, "adapter": "causal_lm", "tasks": {"generate": {}, "extract": {"guard": "llama_guard"}}}
    )
    assert guard.tasks.extract is not None and guard.tasks.extract.guard == "llama_guard"
    with pytest.raises(ValidationError, match=r"set tasks\.extract\.guard"):
        ModelConfig.model_validate({**base, "adapter": "causal_lm", "tasks": {"generate": {}, "extract": {}}})
    with pytest.raises(ValidationError, match="not a gliner model"):
        ModelConfig.model_validate({**base, "adapter": "gliner", "tasks": {"extract": {"guard": "qwen3guard"}}})
    with pytest.raises(ValidationError):
        ModelConfig.model_validate(
            {**base, "adapter": "causal_lm", "tasks": {"generate": {}, "extract": {"guard": "shieldgemma"}}}
        )
