"""The open-vocabulary detectors (OWLv2, Grounding DINO) on tiny random models, as a caller sees them:
boxes in pixels of each picture, thresholds that decide how many objects come back, the caller's labels."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image

from sie_server.adapters import create_adapter
from sie_server.adapters.runtime.media import Found, Picture, picture_tokens
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.errors import InvalidInput
from tests.helpers.tiny_detectors import DINO_QUERIES, build_grounding_dino, build_owlv2

OWL_BOXES = 16  # the tiny OWLv2 proposes one box per 8 px patch of its 32 px input
KEEP_ALL = {"owlv2": {"score_threshold": 0.0}, "grounding_dino": {"box_threshold": 0.0, "text_threshold": 0.0}}
DEFAULTS: dict[str, dict[str, Any]] = {
    "owlv2": {"threshold": 0.1, "options": {"score_threshold": 0.1}},
    "grounding_dino": {"threshold": 0.35, "options": {"box_threshold": 0.35, "text_threshold": 0.25}},
}


def config(kind: str, folder: Path, extract: dict[str, Any] | None = None, max_batch_tokens: int = 8192) -> ModelConfig:
    return ModelConfig.model_validate(
        {
            "id": f"tests/tiny-{kind}",
            "source": {"path": str(folder)},
            "adapter": kind,
            "architecture": {"model_type": "owlv2" if kind == "owlv2" else "grounding-dino", "hidden_size": 32},
            "tasks": {"extract": DEFAULTS[kind] if extract is None else extract},
            "max_sequence_length": 16 if kind == "owlv2" else 256,
            "profiles": {"cpu": {"max_batch_tokens": max_batch_tokens}, "cuda": {}},
        }
    )


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("detectors")
    return {"owlv2": build_owlv2(root / "owlv2"), "grounding_dino": build_grounding_dino(root / "dino")}


@pytest.fixture(scope="module")
def make(folders: dict[str, Path]) -> Callable[..., Any]:
    """A loaded adapter of a kind, with the default config or other extract defaults / budget."""

    def build(kind: str, extract: dict[str, Any] | None = None, max_batch_tokens: int = 8192) -> Any:
        model = config(kind, folders[kind], extract, max_batch_tokens)
        adapter = create_adapter(model, model.profile("cpu"), "cpu")
        adapter.load(folders[kind])
        return adapter

    return build


@pytest.fixture(scope="module")
def owl(make: Callable[..., Any]) -> Any:
    return make("owlv2")


@pytest.fixture(scope="module")
def dino(make: Callable[..., Any]) -> Any:
    return make("grounding_dino")


@pytest.fixture(params=["owlv2", "grounding_dino"])
def detector(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("owl" if request.param == "owlv2" else "dino")


def picture(width: int, height: int, page: int | None = None, seed: int = 0) -> Picture:
    """A picture with some structure (stripes), so the models see more than one colour."""
    image = Image.new("RGB", (width, height), (200, 30 + seed * 40, 30))
    for x in range(0, width, 16):
        image.paste((20, 20, 220), (x, 0, min(x + 8, width), height))
    return Picture(image, page)


def run(
    adapter: Any, pictures: list[Picture], labels: list[str], threshold: float | None = None, **options: Any
) -> list[Found]:
    found: list[Found] = adapter.run([picture_tokens(p) for p in pictures], MediaOptions.of(labels, threshold, options))
    return found


def kind(adapter: Any) -> str:
    return str(adapter.config.adapter)


def test_boxes_are_integer_pixels_inside_a_non_square_picture(detector: Any) -> None:
    for size in [(200, 80), (80, 200)]:
        shown = picture(*size)
        (found,) = run(detector, [shown], ["cat", "a red car"], **KEEP_ALL[kind(detector)])
        assert found.objects, size
        for obj in found.objects:
            box = obj["bbox"]
            assert len(box) == 4 and all(type(v) is int for v in box), obj
            x, y, w, h = box
            assert x >= 0 and y >= 0 and w > 0 and h > 0 and x + w <= size[0] and y + h <= size[1], (size, obj)
            assert obj["label"] in ("cat", "a red car") and 0.0 <= obj["score"] <= 1.0
        scores = [o["score"] for o in found.objects]
        assert scores == sorted(scores, reverse=True)  # best first


def test_owlv2_boxes_are_mapped_back_through_its_square_padding(owl: Any) -> None:
    """OWLv2's boxes are relative to the picture padded (bottom, right) to a square of its longer side."""
    wide, tall = picture(200, 80), picture(80, 200)
    # (cx, cy, w, h) relative to the 200 px square, and which label scores (logit 5: 0.993)
    boxes = [
        (0.5, 0.25, 0.25, 0.125),  # x 75..125, y 37.5..62.5: rounded outwards
        (0.3, 0.15, 0.2, 0.1),  # x 40..80, y 20..40, not widened by float noise
        (0.1, 0.4, 0.1, 0.2),  # y 60..100: clipped at the picture's bottom (80)
        (0.5, 0.9, 0.2, 0.1),  # wholly in the padding below the picture: dropped
        (0.5, 0.25, 0.2, 0.2),  # scores below the threshold: dropped
    ]
    logits = torch.full((2, len(boxes), 2), -5.0)
    for index, label in enumerate([1, 0, 0, 1]):
        logits[:, index, label] = 5.0
    pred = torch.tensor([boxes, [(b[1], b[0], b[3], b[2]) for b in boxes]])  # the tall picture: transposed
    found = owl.objects(logits, pred, [wide, tall], ("cat", "dog"), 0.5)
    got = [sorted((o["label"], o["bbox"]) for o in f.objects) for f in found]
    assert got[0] == sorted([("dog", [75, 37, 50, 26]), ("cat", [40, 20, 40, 20]), ("cat", [10, 60, 20, 20])])
    assert got[1] == sorted([("dog", [37, 75, 26, 50]), ("cat", [20, 40, 20, 40]), ("cat", [60, 10, 20, 20])])
    assert all(o["score"] == pytest.approx(1 / (1 + math.exp(-5))) for f in found for o in f.objects)


def test_grounding_dino_boxes_and_tokens_map_to_the_callers_labels(dino: Any) -> None:
    """Boxes are relative to the picture itself; a box's label is the caller's label whose tokens score
    highest above text_threshold, and a box whose best tokens are no label's (the dots) is dropped."""
    labels = ("Red Car", "dog")
    text, owner = dino.prompt(labels)
    car, dog = int((owner == 0).nonzero()[-1]), int((owner == 1).nonzero()[0])
    dot = int((text["input_ids"][0] == 1012).nonzero()[0])
    boxes = [(0.5, 0.5, 0.5, 0.25), (0.25, 0.25, 0.1, 0.1), (0.5, 0.5, 0.2, 0.2), (0.7, 0.5, 0.2, 0.5)]
    logits = torch.full((1, len(boxes), 256), float("-inf"))
    logits[0, :, : owner.shape[0]] = -10.0
    logits[0, 0, car] = 5.0  # "Red Car", sure
    logits[0, 1, dog] = 5.0  # "dog", sure
    logits[0, 2, dot] = 5.0  # a sure box, but on the dot between the labels
    logits[0, 3, dog] = 0.0  # "dog" at 0.5: kept by text_threshold 0.4, not 0.6
    ids = text["input_ids"]
    wide = picture(200, 80, page=4)

    def objects(text_threshold: float) -> list[tuple[str, list[int]]]:
        (found,) = dino.objects(logits, torch.tensor([boxes]), ids, owner, [wide], labels, 0.35, text_threshold)
        assert all(o["page"] == 4 for o in found.objects)
        return sorted((o["label"], o["bbox"]) for o in found.objects)

    sure = [("Red Car", [50, 30, 100, 20]), ("dog", [40, 16, 20, 8])]
    assert objects(0.6) == sorted(sure)
    assert objects(0.4) == sorted([*sure, ("dog", [120, 20, 40, 40])])


def test_owlv2_thresholds_decide_how_many_objects_come_back(owl: Any) -> None:
    square = [picture(64, 64)]
    every = run(owl, square, ["cat", "dog"], score_threshold=0.0)[0].objects
    assert len(every) == OWL_BOXES  # every patch's box lies in a square picture
    scores = sorted(o["score"] for o in every)
    middle = (scores[7] + scores[8]) / 2
    assert scores[7] < scores[8]
    assert len(run(owl, square, ["cat", "dog"], score_threshold=middle)[0].objects) == 8  # those scoring above it
    assert len(run(owl, square, ["cat", "dog"], threshold=middle)[0].objects) == 8  # the request's threshold too
    assert run(owl, square, ["cat", "dog"], score_threshold=1.0)[0].objects == []


def test_grounding_dino_thresholds_decide_how_many_objects_come_back(dino: Any) -> None:
    square = [picture(64, 64)]

    def count(box: float, text: float) -> int:
        return len(run(dino, square, ["cat", "dog"], box_threshold=box, text_threshold=text)[0].objects)

    assert count(0.0, 0.0) == DINO_QUERIES  # one box per query
    assert count(1.0, 0.0) == 0
    assert count(0.0, 1.0) == 0


def test_config_defaults_apply_and_the_request_overrides_them(make: Callable[..., Any]) -> None:
    square = [picture(64, 64)]
    strict_owl = make("owlv2", {"threshold": 0.0, "options": {"score_threshold": 1.0}})
    assert run(strict_owl, square, ["cat"])[0].objects == []  # the config's option: keeps none
    assert len(run(strict_owl, square, ["cat"], threshold=0.0)[0].objects) == OWL_BOXES  # the request's threshold
    assert len(run(strict_owl, square, ["cat"], score_threshold=0.0)[0].objects) == OWL_BOXES
    assert run(strict_owl, square, ["cat"], threshold=0.0, score_threshold=1.0)[0].objects == []  # option first
    no_options = make("owlv2", {"threshold": 1.0})
    assert run(no_options, square, ["cat"])[0].objects == []  # the config's threshold when it sets no option
    assert len(run(no_options, square, ["cat"], threshold=0.0)[0].objects) == OWL_BOXES

    strict_text = make("grounding_dino", {"threshold": 0.0, "options": {"box_threshold": 0.0, "text_threshold": 1.0}})
    assert run(strict_text, square, ["cat"])[0].objects == []
    assert len(run(strict_text, square, ["cat"], text_threshold=0.0)[0].objects) == DINO_QUERIES
    strict_box = make("grounding_dino", {"threshold": 0.0, "options": {"box_threshold": 1.0, "text_threshold": 0.0}})
    assert run(strict_box, square, ["cat"])[0].objects == []
    assert len(run(strict_box, square, ["cat"], threshold=0.0)[0].objects) == DINO_QUERIES  # threshold: the box's


def test_labels_come_back_as_the_caller_spelled_them(detector: Any) -> None:
    (found,) = run(detector, [picture(64, 64)], ["A Red CAR"], **KEEP_ALL[kind(detector)])
    assert found.objects and {o["label"] for o in found.objects} == {"A Red CAR"}


def test_the_page_carries_through(detector: Any) -> None:
    page, image = run(detector, [picture(64, 48, page=3), picture(64, 48)], ["cat"], **KEEP_ALL[kind(detector)])
    assert page.objects and all(o["page"] == 3 for o in page.objects)
    assert image.objects and all(o["page"] is None for o in image.objects)


def test_a_batch_answers_each_picture_in_order(detector: Any) -> None:
    first, second = picture(200, 80, page=1), picture(64, 96, page=2, seed=2)
    options = KEEP_ALL[kind(detector)]
    ordered = run(detector, [first, second], ["cat", "dog"], **options)
    swapped = run(detector, [second, first], ["cat", "dog"], **options)
    assert len(ordered) == 2
    assert all(o["page"] == 1 for o in ordered[0].objects) and all(o["page"] == 2 for o in ordered[1].objects)

    def boxes(found: Found) -> list[tuple[str, list[int]]]:
        return sorted((o["label"], o["bbox"]) for o in found.objects)

    assert boxes(ordered[0]) == boxes(swapped[1]) and boxes(ordered[1]) == boxes(swapped[0])
    assert max(o["bbox"][1] + o["bbox"][3] for o in ordered[0].objects) <= 80  # the wide picture's own height
    if kind(detector) == "owlv2":  # each picture is padded to its own square: the same alone as in a batch
        assert boxes(ordered[0]) == boxes(run(detector, [first], ["cat", "dog"], **options)[0])


def test_a_batch_is_one_forward_pass_unless_it_outgrows_the_budget(
    make: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    pictures = [picture(16, 16, page=k) for k in range(3)]  # tiny pictures: each is still a 32 px input
    answers = []
    for budget, passes in [(8192, 1), (2, 2)]:  # a 32 px input costs 1 unit: two per pass
        adapter = make("owlv2", max_batch_tokens=budget)
        calls: list[int] = []
        forward = adapter.model.forward

        def counted(*args: Any, forward: Any = forward, calls: list[int] = calls, **kwargs: Any) -> Any:
            calls.append(int(kwargs["pixel_values"].shape[0]))
            return forward(*args, **kwargs)

        monkeypatch.setattr(adapter.model, "forward", counted)
        found = run(adapter, pictures, ["cat"], score_threshold=0.0)
        assert len(calls) == passes and sum(calls) == 3
        assert [{o["page"] for o in f.objects} for f in found] == [{0}, {1}, {2}]
        answers.append([[o["bbox"] for o in f.objects] for f in found])
    assert answers[0] == answers[1]


def test_load_warmup_bytes_and_unload(make: Callable[..., Any]) -> None:
    for name in ("owlv2", "grounding_dino"):
        adapter = make(name)
        adapter.warmup()
        weights = sum(p.numel() * p.element_size() for p in adapter.model.parameters())
        assert adapter.resident_bytes() >= weights > 0
        adapter.unload()
        assert adapter.resident_bytes() == 0


BAD: list[tuple[str, list[str] | None, float | None, dict[str, Any], str]] = [
    ("owlv2", None, None, {}, "params.labels names what to detect"),
    ("owlv2", [], None, {}, "params.labels names what to detect"),
    ("grounding_dino", None, None, {}, "params.labels names what to detect"),
    ("owlv2", ["cat", "  "], None, {}, "blank label"),
    ("grounding_dino", ["..."], None, {}, "dots only"),
    ("owlv2", [f"thing {k}" for k in range(26)], None, {}, "at most 25"),
    ("owlv2", ["cat"], None, {"box_threshold": 0.3}, "unknown option 'box_threshold'"),
    ("grounding_dino", ["cat"], None, {"score_threshold": 0.3}, "unknown option 'score_threshold'"),
    ("owlv2", ["cat"], None, {"score_threshold": 1.5}, "params.options.score_threshold must be a number from 0 to 1"),
    ("owlv2", ["cat"], None, {"score_threshold": "high"}, "must be a number"),
    ("grounding_dino", ["cat"], None, {"text_threshold": True}, "params.options.text_threshold must be a number"),
    ("grounding_dino", ["cat"], None, {"box_threshold": -0.1}, "params.options.box_threshold must be a number"),
    ("grounding_dino", ["cat"], 1.2, {}, "params.threshold must be a number from 0 to 1"),
    ("grounding_dino", ["abcdefghijklmnop"] * 20, None, {}, "reads 256"),  # 20 labels of 16 word pieces each
]


@pytest.mark.parametrize(("family", "labels", "threshold", "options", "message"), BAD)
def test_bad_requests_are_invalid_input(
    family: str,
    labels: list[str] | None,
    threshold: float | None,
    options: dict[str, Any],
    message: str,
    request: pytest.FixtureRequest,
) -> None:
    adapter = request.getfixturevalue("owl" if family == "owlv2" else "dino")
    asked = MediaOptions.of(labels, threshold, options)
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(")) as caught:
        adapter.check(asked)
    assert caught.value.status == 400
    adapter.check(MediaOptions.of(["cat"], None, {}))  # a good request passes
