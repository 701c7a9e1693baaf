"""Extract entities from texts (GLiNER; GLiNER2 also answers a ``params.schema``): the texts' windows on the
shared queue (``InferenceService.extract``), each item's spans, and a schema's results in SIE 0.10.1's item
fields."""

from __future__ import annotations

from dataclasses import dataclass

from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import ExtractRequest, ExtractSchema
from sie_server.contract.responses import (
    Classification,
    Entity,
    ExtractedItem,
    ExtractResponse,
    Relation,
    SchemaResult,
)
from sie_server.engine.extract.protocol import ExtractEngine, wire_timing
from sie_server.engine.outcomes import ExtractOutcome, TextInput, Timing


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


@dataclass(frozen=True)
class EntitiesRequest:
    """The texts and what to find in them: labels, or a GLiNER2 schema, and the score threshold."""

    items: list[TextInput]
    labels: list[str] | None
    threshold: float | None
    schema: ExtractSchema | None


class Entities:
    """The entities kind: each item's spans for the caller's labels (or a schema's answer)."""

    def decode(self, model: ModelConfig, request: ExtractRequest) -> EntitiesRequest:
        params = request.params
        items = [TextInput(id=item.id_at(k), text=item.text or "") for k, item in enumerate(request.items)]
        return EntitiesRequest(
            items,
            labels=params.labels if params else None,
            threshold=params.threshold if params else None,
            schema=params.schema_ if params else None,
        )

    async def queue(
        self, engine: ExtractEngine, model: ModelConfig, decoded: EntitiesRequest, call: CallOptions, timing: Timing
    ) -> ExtractOutcome:
        """The service's span extraction times itself (from after its checks): its outcome carries that timing."""
        return await engine.inference.extract(
            model, decoded.items, labels=decoded.labels, threshold=decoded.threshold, call=call, schema=decoded.schema
        )

    def assemble(
        self, model: ModelConfig, decoded: EntitiesRequest, outcomes: ExtractOutcome, timing: Timing
    ) -> ExtractResponse:
        schemas = outcomes.schema_results
        items = []
        for k, (i, found) in enumerate(zip(outcomes.ids, outcomes.entities, strict=True)):
            item = ExtractedItem(id=i, entities=[Entity(**e) for e in found])
            if schemas is not None:
                item = schema_answer(item, SchemaResult.model_validate(schemas[k]))
            items.append(item)
        return ExtractResponse(model=outcomes.model, items=items, timing=wire_timing(outcomes.timing))


HANDLER = Entities()
