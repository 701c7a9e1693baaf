"""Extract's one shape: every model's family names its kind, every kind has one handler, and the kind of every
model in the catalog is the path the front door's former chain of ``if``s took for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sie_server.catalog.families import EXTRACT_KINDS, FAMILIES, ExtractKind
from sie_server.catalog.loader import parse_config_file
from sie_server.catalog.schema import ModelConfig
from sie_server.engine.extract.registry import HANDLERS, handler_for
from tests.helpers.catalog import CPU_PROFILE, REAL_CATALOG


def chain_kind(model: ModelConfig) -> ExtractKind:
    """The path ``EngineFrontDoor.extract`` chose before the registry, written as it was."""
    if model.accepts_audio:
        return ExtractKind.SPEECH
    if "text" not in model.inputs:
        return ExtractKind.DOCUMENT if model.parses_documents else ExtractKind.PICTURE
    if model.tasks.extract is not None and model.tasks.extract.guard:
        return ExtractKind.GUARD
    if model.classifies:
        return ExtractKind.CLASSIFICATION
    return ExtractKind.ENTITIES


CATALOG = sorted(REAL_CATALOG.glob("*.yaml"))


def test_every_kind_has_one_handler_with_the_three_steps() -> None:
    assert set(HANDLERS) == set(ExtractKind)
    assert len({type(handler) for handler in HANDLERS.values()}) == len(ExtractKind)
    for handler in HANDLERS.values():
        assert all(callable(getattr(handler, step, None)) for step in ("decode", "queue", "assemble")), handler


def test_every_family_with_extract_names_its_kind() -> None:
    with_extract = {family for family, (_, allowed) in FAMILIES.items() if "extract" in allowed}
    assert with_extract - set(EXTRACT_KINDS) == {"causal_lm"}  # a causal LM extracts only as a named guard
    assert set(EXTRACT_KINDS) <= with_extract


@pytest.mark.parametrize("path", CATALOG, ids=[p.stem for p in CATALOG])
def test_each_catalog_model_keeps_the_path_it_had(path: Path) -> None:
    model = parse_config_file(path)
    assert model.extract_kind == chain_kind(model)
    assert handler_for(model) is HANDLERS[chain_kind(model)]


def custom(inputs: list[str] | None, extract: dict[str, Any]) -> ModelConfig:
    data: dict[str, Any] = {
        "id": "test/custom",
        "source": {"path": "/nowhere"},
        "adapter": "my_package.module:MyAdapter",
        "tasks": {"extract": extract},
        "max_sequence_length": 64,
        "profiles": CPU_PROFILE,
    }
    if inputs is not None:
        data["inputs"] = inputs
    return ModelConfig.model_validate(data)


@pytest.mark.parametrize(
    ("inputs", "extract", "kind"),
    [
        (None, {}, ExtractKind.ENTITIES),
        (["text", "audio"], {}, ExtractKind.SPEECH),
        (["audio"], {"guard": "qwen3guard"}, ExtractKind.SPEECH),
        (["document"], {}, ExtractKind.DOCUMENT),
        (["image", "document"], {}, ExtractKind.PICTURE),
        (["image"], {}, ExtractKind.PICTURE),
        (["text"], {"guard": "llama_guard"}, ExtractKind.GUARD),
        (["text", "image"], {}, ExtractKind.ENTITIES),
    ],
)
def test_a_custom_adapter_class_gets_the_kind_its_inputs_call_for(
    inputs: list[str] | None, extract: dict[str, Any], kind: ExtractKind
) -> None:
    model = custom(inputs, extract)
    assert model.extract_kind == kind == chain_kind(model)
