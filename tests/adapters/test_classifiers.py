"""Text classifiers on tiny random models: NLI zero-shot (softmax over labels, multi_label per label,
the hypothesis template used), fixed-label heads (softmax vs sigmoid from problem_type, label filter),
GLiClass (single vs multi), and the options each refuses."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from sie_server.adapters import create_adapter
from sie_server.adapters.classifiers.nli import NliClassifier
from sie_server.adapters.runtime.classify import TextClassifier
from sie_server.adapters.runtime.options import ClassifyOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.errors import InvalidInput
from tests.helpers.tiny_classifiers import build_gliclass, build_nli, build_sequence

TEXTS = ["the invoice total is due", "hello world, a short test passage."]
LABELS = ("billing", "greeting", "sports", "weather")


def config(folder: Path, adapter: str, max_labels: int = 1000) -> ModelConfig:
    return ModelConfig.model_validate(
        {
            "id": f"test/{adapter}",
            "source": {"path": str(folder)},
            "adapter": adapter,
            "architecture": {"model_type": "bert", "hidden_size": 32},
            "tasks": {"extract": {"max_labels": max_labels}},
            "max_sequence_length": 128,
            "profiles": {"cpu": {"max_batch_tokens": 8192}},
        }
    )


def loaded(folder: Path, adapter: str) -> TextClassifier:
    local = config(folder, adapter)
    model = create_adapter(local, local.profile("cpu"), "cpu")
    model.load(folder)
    assert isinstance(model, TextClassifier)
    return model


@pytest.fixture(scope="module")
def nli(tmp_path_factory: pytest.TempPathFactory) -> TextClassifier:
    return loaded(build_nli(tmp_path_factory.mktemp("nli")), "nli")


def classify(model: TextClassifier, texts: list[str], options: ClassifyOptions) -> list[Any]:
    model.check(options)
    rows = model.rows(texts, options)
    results = model.run(rows, options)
    out = []
    for k in range(len(texts)):
        mine = [(r, x) for r, x in zip(rows, results, strict=True) if r.data.text == k]
        out.append(model.combine([r for r, _ in mine], [x for _, x in mine], options))
    return out


def test_nli_rows_are_pairs_and_single_label_is_a_softmax_best_first(nli: TextClassifier) -> None:
    options = ClassifyOptions.of(LABELS, None, None)
    rows = nli.rows(TEXTS, options)
    assert len(rows) == len(TEXTS) * len(LABELS)  # one row per (text, label): one batch for the lot
    for answer in classify(nli, TEXTS, options):
        scores = [label["score"] for label in answer.labels]
        assert scores == sorted(scores, reverse=True)
        assert {label["label"] for label in answer.labels} == set(LABELS)
        assert math.isclose(sum(scores), 1.0, abs_tol=1e-5)
        assert list(answer.scores) == list(LABELS)  # every label in the request's order


def test_nli_multi_label_scores_each_label_on_its_own(nli: TextClassifier) -> None:
    single = classify(nli, TEXTS[:1], ClassifyOptions.of(LABELS, None, None))[0]
    multi = classify(nli, TEXTS[:1], ClassifyOptions.of(LABELS, None, {"multi_label": True}))[0]
    total = sum(label["score"] for label in multi.labels)
    assert not math.isclose(total, 1.0, abs_tol=1e-3)
    assert all(0.0 < label["score"] < 1.0 for label in multi.labels)
    # a label's multi-label score does not depend on which other labels were asked
    alone = classify(nli, TEXTS[:1], ClassifyOptions.of(LABELS[:1], None, {"multi_label": True}))[0]
    assert math.isclose(alone.scores[LABELS[0]], multi.scores[LABELS[0]], rel_tol=1e-4)
    assert single.scores != multi.scores


def test_the_hypothesis_template_is_what_the_model_reads(nli: TextClassifier) -> None:
    plain = classify(nli, TEXTS[:1], ClassifyOptions.of(LABELS, None, None))[0]
    other = classify(nli, TEXTS[:1], ClassifyOptions.of(LABELS, None, {"hypothesis_template": "a b c d {} e f"}))[0]
    assert plain.scores != other.scores
    rows = nli.rows(TEXTS[:1], ClassifyOptions.of(("sports",), None, {"hypothesis_template": "topic: {}"}))
    assert isinstance(nli, NliClassifier)
    alone = nli.tokenizer.encode("the invoice total is due", "topic: sports")
    assert rows[0].input_ids == list(alone.ids)


def test_threshold_drops_labels_under_it(nli: TextClassifier) -> None:
    [answer] = classify(nli, TEXTS[:1], ClassifyOptions.of(LABELS, 0.26, None))
    assert all(label["score"] >= 0.26 for label in answer.labels)
    assert len(answer.scores) == len(LABELS)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (ClassifyOptions.of((), None, None), "params.labels"),
        (ClassifyOptions.of([f"l{k}" for k in range(1001)], None, None), "params.labels: 1001"),
        (ClassifyOptions.of(LABELS, None, {"hypothesis_template": "no slot"}), "hypothesis_template"),
        (ClassifyOptions.of(LABELS, None, {"hypothesis_template": "{0} {x}"}), "hypothesis_template"),
        (ClassifyOptions.of(LABELS, None, {"multi_label": "yes"}), "multi_label"),
        (ClassifyOptions.of(LABELS, None, {"colour": "red"}), "colour"),
        (ClassifyOptions.of(("a", "a"), None, None), "twice"),
    ],
)
def test_bad_options_are_refused_naming_the_field(nli: TextClassifier, options: ClassifyOptions, field: str) -> None:
    with pytest.raises(InvalidInput, match=field):
        nli.check(options)


def test_a_fixed_label_head_answers_all_its_labels_softmax(tmp_path: Path) -> None:
    model = loaded(build_sequence(tmp_path, ("NEGATIVE", "POSITIVE", "NEUTRAL")), "sequence_classifier")
    answers = classify(model, TEXTS, ClassifyOptions())
    for answer in answers:
        assert list(answer.scores) == ["NEGATIVE", "POSITIVE", "NEUTRAL"]  # the model's id order
        assert math.isclose(sum(answer.scores.values()), 1.0, abs_tol=1e-5)
        assert [label["score"] for label in answer.labels] == sorted(answer.scores.values(), reverse=True)
    [only] = classify(model, TEXTS[:1], ClassifyOptions.of(["POSITIVE"], None, None))
    assert [label["label"] for label in only.labels] == ["POSITIVE"]
    assert math.isclose(only.labels[0]["score"], answers[0].scores["POSITIVE"], rel_tol=1e-5)
    with pytest.raises(InvalidInput, match="not labels of model"):
        model.check(ClassifyOptions.of(["toxic"], None, None))


def test_a_multi_label_head_scores_each_label_with_a_sigmoid(tmp_path: Path) -> None:
    labels = ("toxic", "obscene", "threat", "insult")
    model = loaded(build_sequence(tmp_path, labels, multi_label=True), "sequence_classifier")
    for answer in classify(model, TEXTS, ClassifyOptions()):
        rows = model.rows(TEXTS[:1], ClassifyOptions())
        logits = model.run(rows, ClassifyOptions())[0]
        assert all(0.0 < s < 1.0 for s in answer.scores.values())
        assert not math.isclose(sum(answer.scores.values()), 1.0, abs_tol=1e-3)
    [first] = classify(model, TEXTS[:1], ClassifyOptions())
    assert [first.scores[name] for name in labels] == pytest.approx([1 / (1 + math.exp(-v)) for v in logits])


def test_gliclass_single_is_a_softmax_and_multi_a_sigmoid(tmp_path: Path) -> None:
    model = loaded(build_gliclass(tmp_path), "gliclass")
    rows = model.rows(TEXTS, ClassifyOptions.of(LABELS, None, None))
    assert len(rows) == len(TEXTS)  # one pass per text: the labels are in its input
    single = classify(model, TEXTS, ClassifyOptions.of(LABELS, None, {"classification_type": "single"}))
    multi = classify(model, TEXTS, ClassifyOptions.of(LABELS, None, {"classification_type": "multi"}))
    for s, m in zip(single, multi, strict=True):
        assert math.isclose(sum(s.scores.values()), 1.0, abs_tol=1e-5)
        assert list(s.scores) == list(LABELS) == list(m.scores)
        assert all(0.0 < v < 1.0 for v in m.scores.values())
        assert [label["label"] for label in s.labels] == sorted(s.scores, key=lambda k: -s.scores[k])
    with pytest.raises(InvalidInput, match="classification_type"):
        model.check(ClassifyOptions.of(LABELS, None, {"classification_type": "both"}))
