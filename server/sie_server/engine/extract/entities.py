"""Extract entities from texts (GLiNER; GLiNER2 also answers a ``params.schema``): the texts' windows on the
shared queue, batched with every other caller's for the same model, labels and schema; each item's spans merged
from its windows, and a schema's results in SIE 0.10.1's item fields. What cannot be served fails the request.
"""

from __future__ import annotations

from dataclasses import dataclass

from sie_server.adapters.extractors.gliner2 import Gliner2Adapter
from sie_server.adapters.runtime.encoder import SpanExtractor
from sie_server.adapters.runtime.options import ExtractOptions
from sie_server.catalog.schema import ExtractTask, ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import ExtractRequest, ExtractSchema
from sie_server.contract.responses import Classification, Entity, ExtractedItem, ExtractResponse, Relation, SchemaResult
from sie_server.engine.extract.protocol import ExtractEngine, wire_timing
from sie_server.engine.extract.queue import adapter_of, run, tokenize
from sie_server.engine.outcomes import ExtractOutcome, Timing
from sie_server.errors import InvalidInput


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
    """The texts and what to find in them: the caller's labels, or a GLiNER2 schema (as JSON, with its
    entities as the labels), and the score threshold."""

    ids: list[str]
    texts: list[str]
    options: ExtractOptions


def labels_of(model: ModelConfig, task: ExtractTask, labels: list[str] | None) -> tuple[str, ...]:
    """The caller's entity types, refused when missing, empty, blank or more than the model takes."""
    if labels is None:
        raise InvalidInput('params.labels is required: the entity types to find, e.g. ["company", "amount"]')
    if not labels:
        raise InvalidInput('params.labels must name at least one entity type, e.g. ["company", "amount"]')
    if len(labels) > task.max_labels:
        raise InvalidInput(f"{len(labels)} labels; model {model.id} takes at most {task.max_labels} per request")
    if any(not label.strip() for label in labels):
        raise InvalidInput("every label must be a non-empty string")
    return tuple(labels)


def schema_of(model: ModelConfig, task: ExtractTask, schema: ExtractSchema, labels: list[str] | None) -> str:
    """A GLiNER2 schema as JSON (one pass per window answers all of it), refused on another family, beside
    ``params.labels`` or with more names in a part than the model takes."""
    if model.adapter != "gliner2":
        raise InvalidInput(f"params.schema is for GLiNER2 models; model {model.id} is {model.adapter}")
    if labels is not None:
        raise InvalidInput("give params.labels or params.schema (its entities), not both")
    for part, count in schema.names().items():
        if count > task.max_labels:
            raise InvalidInput(f"params.schema.{part}: {count} names; model {model.id} takes at most {task.max_labels}")
    return schema.model_dump_json(exclude_none=True)


class Entities:
    """The entities kind: each item's spans for the caller's labels (or a schema's answer)."""

    def decode(self, model: ModelConfig, request: ExtractRequest) -> EntitiesRequest:
        task = model.tasks.extract
        if task is None:
            raise InvalidInput(f"model {model.id} does not support extract (its tasks: {model.tasks.names()})")
        params = request.params
        labels = params.labels if params else None
        schema = params.schema_ if params else None
        threshold = params.threshold if params else None
        if schema is not None:
            wire: str | None = schema_of(model, task, schema, labels)
            names = tuple(schema.entities or ())
        else:
            wire, names = None, labels_of(model, task, labels)
        texts = [item.text or "" for item in request.items]
        for i, text in enumerate(texts):
            if not text.strip():
                raise InvalidInput(f"items[{i}] has no characters to extract from")
        limit = task.threshold if threshold is None else threshold
        ids = [item.id_at(k) for k, item in enumerate(request.items)]
        return EntitiesRequest(ids, texts, ExtractOptions(labels=names, threshold=limit, schema=wire))

    async def queue(
        self, engine: ExtractEngine, model: ModelConfig, decoded: EntitiesRequest, call: CallOptions, timing: Timing
    ) -> ExtractOutcome:
        """Every text's windows in one call (each window names its text by position), queued together."""
        service, schema, count = engine.inference, decoded.options.schema, len(decoded.texts)
        family: tuple[type[SpanExtractor], ...] = (SpanExtractor,) if schema is None else (Gliner2Adapter,)
        does = "support extract" if schema is None else "support extract with params.schema"
        adapter = await adapter_of(service, model, call, family, does)
        windows = await tokenize(service, timing, adapter.windows, decoded.texts, split=False)
        found = await run(service, model, windows, decoded.options, call, timing)
        entities = adapter.merge(count, windows, found)
        results = None
        if schema is not None and isinstance(adapter, Gliner2Adapter):
            results = adapter.merge_schema(count, windows, found, schema)
        return ExtractOutcome(model.id, decoded.ids, entities, timing, results)

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
