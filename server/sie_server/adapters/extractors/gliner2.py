"""GLiNER2 extraction: entity labels as GLiNER does, and schema extraction (entities, classifications,
structures, relations in one pass) for a request with ``params.schema``.

Long texts are windowed as for GLiNER (``adapters/extractors/gliner.py``): each window is one queued item and
``merge``/``merge_schema`` map the windows' findings back onto their text. A window's ``run`` result
is a ``Found``: its flat entity spans (what ``merge`` reads) carrying, for a schema batch, the
window's schema answer with offsets into the window.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

from sie_server.adapters.extractors.gliner import GlinerAdapter, merge_windows, word_windows
from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.options import Entity, ExtractOptions, Span

#: the prompt room a window leaves for the schema's names, as a share of the backbone's positions
PROMPT_SHARE = 4


class Value(TypedDict):
    """A span of the text (character offsets), or a chosen value of a ``choices`` field (offsets None)."""

    text: str
    score: float
    start: int | None
    end: int | None


class Label(TypedDict):
    label: str
    score: float


class Relation(TypedDict):
    head: Value
    tail: Value


class SchemaFound(TypedDict):
    """One text's (or window's) answer to a schema, keyed by the schema's names (as ``SchemaResult``)."""

    entities: dict[str, list[Value]]
    classifications: dict[str, list[Label]]
    structures: dict[str, list[dict[str, list[Value]]]]
    relations: dict[str, list[Relation]]


class Found(list[Span]):
    """A window's entity spans, and for a schema batch its whole schema answer (offsets into the window)."""

    def __init__(self, spans: list[Span], schema: SchemaFound | None = None):
        super().__init__(spans)
        self.schema = schema


def gliner2_schema(wire: dict[str, Any]) -> dict[str, Any]:
    """``params.schema`` (the wire layout, as JSON-decoded) in GLiNER2's ``Schema.from_dict`` layout."""
    out: dict[str, Any] = {}
    if wire.get("entities"):
        out["entities"] = list(wire["entities"])
    if wire.get("classifications"):
        out["classifications"] = [
            {"task": name, "labels": c["labels"], "multi_label": c.get("multi_label", False)}
            for name, c in wire["classifications"].items()
        ]
    if wire.get("structures"):
        out["structures"] = {
            name: {"fields": [{"name": field, **spec} for field, spec in fields.items()]}
            for name, fields in wire["structures"].items()
        }
    if wire.get("relations"):
        out["relations"] = list(wire["relations"])
    return out


class Gliner2Adapter(GlinerAdapter):
    """GLiNER's windows, unload and warm-up; GLiNER2's model, prompt room and schema extraction."""

    model: Any = None

    def load(self, weights: Path) -> None:
        from gliner2 import GLiNER2

        self.model = GLiNER2.from_pretrained(str(weights), map_location=self.device)
        self.model.eval()
        self.window_words = min(self.config.max_sequence_length, int(getattr(self.model.config, "max_len", 0) or 384))

    def windows(self, texts: list[str]) -> list[Tokens]:
        """Each text as windows (``word_windows``) that also fit the backbone less the prompt's room."""
        positions = int(getattr(self.model.encoder.config, "max_position_embeddings", 0) or 512)
        return word_windows(
            texts, self.model.processor.tokenizer, self.window_words, positions - positions // PROMPT_SHARE
        )

    def run(self, batch: list[Tokens], options: ExtractOptions) -> list[list[Span]]:
        from gliner2 import Schema

        texts = [t.data.text for t in batch]
        wire: dict[str, Any] = {"entities": list(options.labels)}
        if options.schema is None:
            schema = self.model.create_schema().entities(list(options.labels))
        else:
            wire = json.loads(options.schema)
            schema = Schema.from_dict(gliner2_schema(wire))
        raw = self.model.batch_extract(
            texts,
            schema,
            batch_size=len(texts),
            threshold=options.threshold,
            include_confidence=True,
            include_spans=True,
        )
        out: list[list[Span]] = []
        for text, result in zip(texts, raw, strict=True):
            found = schema_found(result, wire, text)
            spans = [
                Span(text=v["text"], label=label, score=v["score"], start=v["start"], end=v["end"])
                for label, values in found["entities"].items()
                for v in values
                if v["start"] is not None and v["end"] is not None
            ]
            out.append(Found(spans, found if options.schema is not None else None))
        return out

    def merge(self, texts: int, windows: list[Tokens], found: list[list[Span]]) -> list[list[Entity]]:
        return merge_windows(texts, [w.data for w in windows], found)

    def merge_schema(
        self, texts: int, windows: list[Tokens], found: list[list[Span]], schema: str
    ) -> list[SchemaFound]:
        """Each text's schema answer from its windows' (``run`` of a batch with this ``schema``)."""
        classifications = json.loads(schema).get("classifications") or {}
        multi = frozenset(name for name, c in classifications.items() if c.get("multi_label"))
        answers: list[list[tuple[int, SchemaFound]]] = [[] for _ in range(texts)]
        for window, spans in zip(windows, found, strict=True):
            assert isinstance(spans, Found) and spans.schema is not None, "merge_schema after a schema batch only"
            answers[window.data.item].append((window.data.offset, spans.schema))
        return [merge_answers(parts, multi) for parts in answers]


def _value(raw: Any, text: str) -> Value | None:
    """A found value; a span is clipped to ``text`` (GLiNER2 reads a text not ending in . ! ? with a "."
    appended, and may include it) and its text is the text's own characters there."""
    if not isinstance(raw, dict) or not raw.get("text"):
        return None
    score = float(raw.get("confidence", 0.0))
    start, end = raw.get("start"), raw.get("end")
    if start is None or end is None:
        return Value(text=str(raw["text"]), score=score, start=None, end=None)
    start, end = int(start), min(int(end), len(text))
    if start >= end:
        return None
    return Value(text=text[start:end], score=score, start=start, end=end)


def _values(raw: Any, text: str) -> list[Value]:
    items = raw if isinstance(raw, list) else [raw]
    return [v for v in (_value(item, text) for item in items) if v is not None]


def _labels(raw: Any) -> list[Label]:
    items = raw if isinstance(raw, list) else [raw]
    return [
        Label(label=str(i["label"]), score=float(i.get("confidence", 0.0)))
        for i in items
        if isinstance(i, dict) and "label" in i
    ]


def schema_found(result: dict[str, Any], wire: dict[str, Any], text: str) -> SchemaFound:
    """GLiNER2's formatted result (with confidences and spans) for ``text`` in the answer's shape: every
    name the schema declares is present, with an empty list when nothing was found."""
    entities = result.get("entities") or {}
    relations = result.get("relation_extraction") or {}
    found = SchemaFound(
        entities={name: _values(entities.get(name) or [], text) for name in wire.get("entities") or []},
        classifications={name: _labels(result.get(name)) for name in wire.get("classifications") or {}},
        structures={},
        relations={},
    )
    for name, fields in (wire.get("structures") or {}).items():
        instances = result.get(name) or []
        found["structures"][name] = [
            {field: _values(instance.get(field) or [], text) for field in fields}
            for instance in (instances if isinstance(instances, list) else [instances])
            if isinstance(instance, dict)
        ]
    for name in wire.get("relations") or []:
        pairs = [
            (_value(p.get("head"), text), _value(p.get("tail"), text))
            for p in relations.get(name) or []
            if isinstance(p, dict)
        ]
        found["relations"][name] = [Relation(head=h, tail=t) for h, t in pairs if h is not None and t is not None]
    return found


def _moved(value: Value, offset: int) -> Value:
    if value["start"] is None or value["end"] is None:
        return value
    return Value(text=value["text"], score=value["score"], start=value["start"] + offset, end=value["end"] + offset)


def _key(value: Value) -> tuple[Any, ...]:
    return (value["start"], value["end"]) if value["start"] is not None else (value["text"],)


def _best(values: list[Value]) -> list[Value]:
    """The values once each (same span or same choice), with their best score, best first."""
    kept: dict[tuple[Any, ...], Value] = {}
    for value in values:
        if (old := kept.get(_key(value))) is None or old["score"] < value["score"]:
            kept[_key(value)] = value
    return sorted(kept.values(), key=lambda v: -v["score"])


def merge_answers(parts: list[tuple[int, SchemaFound]], multi: frozenset[str] = frozenset()) -> SchemaFound:
    """One text's schema answer from its windows' (window offset, answer): spans moved onto the text and
    kept once (overlapping windows find them twice) with their best score; a classification's labels
    with their best score over the windows (the best one; every label found for those in ``multi``);
    a structure's instances and a relation's pairs from every window, each distinct one once."""
    first = parts[0][1]
    merged = SchemaFound(entities={}, classifications={}, structures={}, relations={})
    for name in first["entities"]:
        merged["entities"][name] = _best([_moved(v, o) for o, a in parts for v in a["entities"][name]])
    for name in first["classifications"]:
        labels: dict[str, float] = {}
        for _, answer in parts:
            for label in answer["classifications"][name]:
                labels[label["label"]] = max(labels.get(label["label"], 0.0), label["score"])
        ranked = sorted(labels.items(), key=lambda kv: -kv[1])
        merged["classifications"][name] = [Label(label=k, score=v) for k, v in ranked[: None if name in multi else 1]]
    for name in first["structures"]:
        instances: dict[str, dict[str, list[Value]]] = {}
        for offset, answer in parts:
            for instance in answer["structures"][name]:
                moved = {field: _best([_moved(v, offset) for v in values]) for field, values in instance.items()}
                key = json.dumps({f: [_key(v) for v in vs] for f, vs in moved.items()}, sort_keys=True)
                instances.setdefault(key, moved)
        merged["structures"][name] = list(instances.values())
    for name in first["relations"]:
        pairs: dict[tuple[Any, ...], Relation] = {}
        for offset, answer in parts:
            for pair in answer["relations"][name]:
                head, tail = _moved(pair["head"], offset), _moved(pair["tail"], offset)
                pairs.setdefault((*_key(head), *_key(tail)), Relation(head=head, tail=tail))
        merged["relations"][name] = list(pairs.values())
    return merged
