"""Florence-2 on a tiny random model: task routing, options, batches, and where its boxes land.

Random weights generate garbage, so what a task answers is checked on the parsing path with known
generated text (``parse``, or the adapter's ``generate`` replaced by one that returns that text); the
real ``generate`` is run to show a batch goes through the model in one call and comes back in order.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from sie_server.adapters import create_adapter
from sie_server.adapters.runtime.media import Found, Picture, picture_tokens
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.adapters.vision.florence2 import TASKS, Job, bin_box, parse, quad_box
from sie_server.catalog.schema import ModelConfig
from sie_server.errors import InvalidInput
from tests.helpers.tiny_florence2 import build_florence2

BOX = "<loc_100><loc_200><loc_500><loc_600>"  # in 400 x 200: x 40.0..200.4, y 40.0..120.2
QUAD = "<loc_100><loc_100><loc_200><loc_100><loc_200><loc_200><loc_100><loc_200>"


def config(folder: Path, options: dict[str, Any] | None = None, max_batch_tokens: int = 4096) -> ModelConfig:
    return ModelConfig.model_validate(
        {
            "id": "tests/tiny-florence2",
            "source": {"path": str(folder)},
            "adapter": "florence2",
            "architecture": {"model_type": "florence2", "hidden_size": 32},
            "tasks": {"extract": {"options": {"task": "<OCR_WITH_REGION>"} if options is None else options}},
            "max_sequence_length": 1024,
            "profiles": {"cpu": {"max_batch_tokens": max_batch_tokens}, "cuda": {}},
        }
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_florence2(tmp_path_factory.mktemp("florence2") / "tiny")


@pytest.fixture(scope="module")
def adapter(folder: Path) -> Any:
    model = config(folder)
    loaded = create_adapter(model, model.profile("cpu"), "cpu")
    loaded.load(folder)
    return loaded


def picture(width: int = 400, height: int = 200, page: int | None = None) -> Picture:
    return Picture(Image.new("RGB", (width, height), (250, 250, 240)), page)


def options(labels: list[str] | None = None, **settings: Any) -> MediaOptions:
    return MediaOptions.of(labels, None, settings)


def canned(adapter: Any, monkeypatch: pytest.MonkeyPatch, texts: list[str]) -> list[Job]:
    """Replace the model's generation with ``texts`` (one per picture); the jobs it was asked for come back."""
    jobs: list[Job] = []

    def generate(pictures: list[Picture], job: Job) -> list[str]:
        jobs.append(job)
        assert len(pictures) == len(texts)
        return texts

    monkeypatch.setattr(adapter, "generate", generate)
    return jobs


def test_location_bins_map_to_outward_rounded_pixels_of_the_picture() -> None:
    found = parse("<OD>", f"</s><s>cat{BOX}</s><pad>", picture(page=3))
    assert found.objects == [{"label": "cat", "score": 1.0, "bbox": [40, 40, 161, 81], "page": 3}]
    # a bin of a 4000 px axis is 4 px: a box runs from its first bin's lower edge to its last bin's upper edge
    assert bin_box([100, 200, 500, 600], 4000, 2000) == [400, 400, 1604, 802]
    assert bin_box([0, 0, 999, 999], 400, 200) == [0, 0, 400, 200]  # the whole picture, not one pixel short
    assert bin_box([500, 600, 100, 200], 400, 200) == [40, 40, 161, 81]  # corners in either order
    assert bin_box([0, 0, 0, 0], 1000, 1000) == [0, 0, 1, 1]  # one bin of a 1000 px axis is one pixel
    assert quad_box([int(n) for n in QUAD[5:-1].split("><loc_")], 400, 200) == [40, 20, 41, 21]


def test_ocr_with_region_answers_lines_in_reading_order_with_their_boxes() -> None:
    lower = "<loc_100><loc_600><loc_300><loc_600><loc_300><loc_700><loc_100><loc_700>"
    found = parse("<OCR_WITH_REGION>", f"</s><s>World{lower}Hello{QUAD}</s>", picture(page=2))
    assert [(e["text"], e["label"], e["score"], e["bbox"], e["page"]) for e in found.entities] == [
        ("Hello", "line", 1.0, [40, 20, 41, 21], 2),
        ("World", "line", 1.0, [40, 120, 81, 21], 2),
    ]
    assert found.data == {"task": "<OCR_WITH_REGION>", "text": "Hello\nWorld"}
    assert found.objects == []


def test_text_tasks_answer_text_and_captions() -> None:
    ocr = parse("<OCR>", "</s><s>Invoice 42</s><pad><pad>", picture())
    assert ocr.data == {"task": "<OCR>", "text": "Invoice 42"}
    assert [(e["text"], e["label"], e["bbox"]) for e in ocr.entities] == [("Invoice 42", "text", None)]
    for task in ("<CAPTION>", "<DETAILED_CAPTION>", "<MORE_DETAILED_CAPTION>"):
        caption = parse(task, "</s><s>A cat on a mat.</s>", picture())
        assert caption.data == {"task": task, "caption": "A cat on a mat.", "text": "A cat on a mat."}
        assert caption.entities == [] and caption.objects == []


def test_grounding_labels_each_box_with_its_phrase() -> None:
    boxes = f"a red car{BOX}<loc_0><loc_0><loc_999><loc_999>the image{BOX}"
    found = parse("<CAPTION_TO_PHRASE_GROUNDING>", boxes, picture(), banned=frozenset({"the image"}))
    assert [(o["label"], o["bbox"]) for o in found.objects] == [
        ("a red car", [40, 40, 161, 81]),
        ("a red car", [0, 0, 400, 200]),
    ]


def test_each_task_answers_its_fields_through_run(adapter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {
        "<OD>": f"</s><s>cat{BOX}</s>",
        "<OCR_WITH_REGION>": f"</s><s>Hello{QUAD}</s>",
        "<CAPTION>": "</s><s>A cat.</s>",
        "<OCR>": "</s><s>Hello</s>",
    }
    for task, text in answers.items():
        canned(adapter, monkeypatch, [text])
        (found,) = adapter.run([picture_tokens(picture())], options(task=task))
        assert found.data["task"] == task
        assert bool(found.objects) == (task == "<OD>")
        assert bool(found.entities) == (task in ("<OCR_WITH_REGION>", "<OCR>"))
        assert ("caption" in found.data) == (task == "<CAPTION>")
        assert ("text" in found.data) == (task != "<OD>")


def test_the_config_default_task_applies_and_the_requests_task_wins(
    adapter: Any, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = canned(adapter, monkeypatch, [f"Hello{QUAD}"])
    (found,) = adapter.run([picture_tokens(picture())], options())
    assert found.data["task"] == "<OCR_WITH_REGION>" and [e["text"] for e in found.entities] == ["Hello"]
    adapter.run([picture_tokens(picture())], options(task="od"))  # Florence's own spelling, or a short one
    assert [j.task for j in jobs] == ["<OCR_WITH_REGION>", "<OD>"]
    assert jobs[0] == Job("<OCR_WITH_REGION>", "<OCR_WITH_REGION>", 1024, 3)  # beam search, the decoder's length
    cpu = config(folder).profile("cpu")
    plain = create_adapter(config(folder, {}), cpu, "cpu")
    assert plain.job(options()).task == "<OCR_WITH_REGION>"  # a config without a default task: Florence reads
    captioner = create_adapter(config(folder, {"task": "<CAPTION>", "num_beams": 1}), cpu, "cpu")
    assert captioner.job(options()) == Job("<CAPTION>", "<CAPTION>", 1024, 1)
    assert captioner.job(options(task="<OD>", num_beams=2)).num_beams == 2
    assert captioner.job(options(max_new_tokens=5000)).max_new_tokens == 1024  # capped at max_sequence_length
    grounding = captioner.job(options(["a cat", " a dog "], task="<CAPTION_TO_PHRASE_GROUNDING>"))
    assert grounding.prompt == "<CAPTION_TO_PHRASE_GROUNDING>a cat, a dog"


@pytest.mark.parametrize(
    ("labels", "settings", "says"),
    [
        (None, {"task": "<SEGMENTATION>"}, "<OCR_WITH_REGION>"),  # the message lists the tasks there are
        (None, {"task": 3}, "unknown Florence-2 task"),
        (None, {"task": "<CAPTION_TO_PHRASE_GROUNDING>"}, "params.labels"),
        ([" "], {"task": "<CAPTION_TO_PHRASE_GROUNDING>"}, "params.labels"),
        (["<OD>"], {"task": "<CAPTION_TO_PHRASE_GROUNDING>"}, "plain phrases"),
        (None, {"score_threshold": 0.5}, "unknown option 'score_threshold'"),
        (None, {"num_beams": 0}, "num_beams"),
        (None, {"num_beams": True}, "num_beams"),
        (None, {"max_new_tokens": "many"}, "max_new_tokens"),
    ],
)
def test_requests_it_cannot_serve_are_invalid_input(
    adapter: Any, labels: list[str] | None, settings: dict[str, Any], says: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(says)):
        adapter.check(options(labels, **settings))


def test_a_batch_is_one_generate_call_with_answers_in_order(adapter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = adapter.model.generate

    def counted(**kwargs: Any) -> Any:
        calls.append(int(kwargs["pixel_values"].shape[0]))
        return real(**kwargs)

    monkeypatch.setattr(adapter.model, "generate", counted)
    pictures = [picture(40, 24, page=1), picture(64, 96, page=2)]
    found = adapter.run([picture_tokens(p) for p in pictures], options(task="<OD>", max_new_tokens=6))
    assert calls == [2] and len(found) == 2 and all(isinstance(f, Found) and f.data["task"] == "<OD>" for f in found)
    monkeypatch.undo()
    canned(adapter, monkeypatch, [f"one{BOX}", f"two{BOX}"])
    found = adapter.run([picture_tokens(p) for p in pictures], options(task="<OD>"))
    assert [(o["label"], o["page"], o["bbox"]) for f in found for o in f.objects] == [
        ("one", 1, [4, 4, 17, 11]),
        ("two", 2, [6, 19, 27, 39]),
    ]


def test_the_real_model_runs_every_task_and_reports_its_bytes(adapter: Any) -> None:
    labels = ["a cat"]
    for task in TASKS:
        (found,) = adapter.run([picture_tokens(picture(48, 32))], options(labels, task=task, max_new_tokens=4))
        assert found.data["task"] == task
        for box in [e["bbox"] for e in found.entities if e["bbox"]] + [o["bbox"] for o in found.objects]:
            assert 0 <= box[0] <= box[0] + box[2] <= 48 and 0 <= box[1] <= box[1] + box[3] <= 32
    assert adapter.resident_bytes() > 0
    adapter.warmup()
