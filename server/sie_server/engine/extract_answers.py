"""Extract answers on the wire: media outcomes and GLiNER2 schema results as SIE 0.10.1's item fields."""

from __future__ import annotations

from sie_server.adapters.runtime.media import Found
from sie_server.contract.requests import ItemIn
from sie_server.contract.responses import (
    Classification,
    DetectedObject,
    Entity,
    ExtractedItem,
    ItemError,
    Relation,
    SchemaResult,
)
from sie_server.engine.media_extract import MediaItem, Outcome
from sie_server.engine.speech_extract import AudioItem


def media_item(item: ItemIn, item_id: str) -> MediaItem:
    document = item.document
    return MediaItem(
        id=item_id,
        images=tuple(image.data for image in item.images or ()),
        document=document.data if document is not None else None,
        document_format=document.format if document is not None else None,
    )


def audio_item(item: ItemIn, item_id: str) -> AudioItem | None:
    """An item's audio for a speech model (None: it has none)."""
    audio = item.audio
    if audio is None:
        return None
    return AudioItem(id=item_id, data=audio.data, format=audio.format, sample_rate=audio.sample_rate)


def media_answer(item_id: str, outcome: Outcome) -> ExtractedItem:
    """One item's answer, or its error (with every list present and empty)."""
    if not isinstance(outcome, Found):
        return ExtractedItem(id=item_id, entities=[], error=ItemError(code=outcome.code.value, message=outcome.message))
    return ExtractedItem(
        id=item_id,
        entities=[Entity(**e) for e in outcome.entities],
        objects=[DetectedObject(**o) for o in outcome.objects],
        classifications=[Classification(**c) for c in outcome.classifications],
        data=outcome.data,
    )


def schema_answer(item: ExtractedItem, result: SchemaResult) -> ExtractedItem:
    """A GLiNER2 schema answer in the item's own fields (as SIE answers it), ``schema_result`` kept as an alias:
    relations as (head, tail, relation, score), each classification's labels, structures and the
    classifications by name in ``data``."""
    relations = [
        Relation(head=r.head.text, tail=r.tail.text, relation=name, score=min(r.head.score, r.tail.score))
        for name, found in result.relations.items()
        for r in found
    ]
    labels = [Classification(label=c.label, score=c.score) for found in result.classifications.values() for c in found]
    data = {
        "structures": {
            name: [{f: [v.model_dump() for v in vs] for f, vs in s.items()} for s in found]
            for name, found in result.structures.items()
        },
        "classifications": {name: [c.model_dump() for c in found] for name, found in result.classifications.items()},
    }
    return item.model_copy(
        update={"relations": relations, "classifications": labels, "data": data, "schema_result": result}
    )
