"""Which handler serves each extract kind: one line a kind. A model's family names its kind
(``ModelConfig.extract_kind``, from ``catalog/families.py``); the front door looks it up here once.

Adding a kind (a VLM reading pages, say) is a member of ``ExtractKind``, a module in this package with a
``HANDLER`` that follows ``protocol.ExtractHandler``, and its line below.
"""

from __future__ import annotations

from typing import Any

from sie_server.catalog.families import ExtractKind
from sie_server.catalog.schema import ModelConfig
from sie_server.engine.extract import classification, documents, entities, guard, pictures, speech
from sie_server.engine.extract.protocol import ExtractHandler

HANDLERS: dict[ExtractKind, ExtractHandler[Any, Any]] = {
    ExtractKind.ENTITIES: entities.HANDLER,
    ExtractKind.DOCUMENT: documents.HANDLER,
    ExtractKind.PICTURE: pictures.HANDLER,
    ExtractKind.SPEECH: speech.HANDLER,
    ExtractKind.CLASSIFICATION: classification.HANDLER,
    ExtractKind.GUARD: guard.HANDLER,
}


def handler_for(model: ModelConfig) -> ExtractHandler[Any, Any]:
    """The handler of the model's extract kind (every kind has its line: tests/engine/test_extract_kinds.py)."""
    return HANDLERS[model.extract_kind]
