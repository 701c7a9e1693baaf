"""Published OpenAPI answer schemas as JSON Schema validators: OpenAI's and TEI's component schemas, copied
unchanged into tests/compat/data by its extract_schemas.py, checked with ``jsonschema`` (Draft 2020-12, the
dialect of OpenAPI 3.1) and ``$ref`` resolved in place through a ``referencing`` registry.

The one translation: OpenAPI 3.0's ``nullable: true`` (all of TEI's 3.0 spec; a few fields of OpenAI's 3.1
spec, the streamed chat chunk's ``finish_reason``, ``logprobs`` and ``usage``, still use it) means "or null",
which JSON Schema writes as a ``null`` type. Nothing else is changed, added or relaxed.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry
from referencing.jsonschema import DRAFT202012

DATA = Path(__file__).resolve().parents[1] / "compat" / "data"
OPENAI = "openai_schemas.json"
TEI = "tei_openapi_schemas.json"


def or_null(node: Any) -> Any:
    """``node`` with every OpenAPI 3.0 ``nullable`` written as JSON Schema's null."""
    if isinstance(node, list):
        return [or_null(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: or_null(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable") is not True:
        return out
    if "$ref" in out:  # a $ref beside other keywords: the referenced schema, or null
        ref = out.pop("$ref")
        return {**out, "anyOf": [{"$ref": ref}, {"type": "null"}]}
    if isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    return {"anyOf": [out, {"type": "null"}]}


class Spec:
    """One data file's schemas: ``errors(name, answer)`` lists where ``answer`` breaks schema ``name``."""

    def __init__(self, filename: str) -> None:
        document = json.loads((DATA / filename).read_text(encoding="utf-8"))
        self.source: dict[str, Any] = document.pop("source")
        self.uri = f"urn:sie-tests:{filename}"
        self.schemas: dict[str, Any] = document["components"]["schemas"]
        resource = DRAFT202012.create_resource(or_null(document))
        self.registry: Registry[Any] = Registry().with_resource(self.uri, resource)

    def validator(self, name: str) -> Draft202012Validator:
        if name not in self.schemas:
            raise KeyError(f"{name} is not among the copied schemas (add it to extract_schemas.py's roots)")
        return Draft202012Validator({"$ref": f"{self.uri}#/components/schemas/{name}"}, registry=self.registry)

    def errors(self, name: str, answer: Any) -> list[str]:
        return sorted(line for e in self.validator(name).iter_errors(answer) for line in self.explain(e))

    def check(self, name: str, answer: Any) -> None:
        """Assert that ``answer`` is valid under schema ``name``, naming every place it is not."""
        found = self.errors(name, answer)
        assert not found, f"not a valid {name} ({self.source['repository']}):\n" + "\n".join(found)

    def member(self, union: str, kind: str) -> str:
        """The member of the union schema ``union`` whose ``type`` property is the constant ``kind`` (OpenAI's
        stream events: their ``type``, as a client dispatches on it)."""
        for option in self.schemas[union].get("anyOf", []) + self.schemas[union].get("oneOf", []):
            name = str(option["$ref"]).rsplit("/", 1)[-1]
            allowed = self.schemas[name].get("properties", {}).get("type", {}).get("enum", [])
            if kind in allowed:
                return name
        raise KeyError(f"no member of {union} has type {kind!r}")

    def explain(self, error: ValidationError) -> list[str]:
        """Where and why. For a failed anyOf / oneOf over objects told apart by their ``type`` (OpenAPI's
        discriminator), the errors of the option that ``type`` names; for another, of the closest option."""
        if not error.context:
            return [f"{error.json_path}: {error.message}"]
        chosen = self.discriminated(error)
        if chosen is not None:
            inner = [e for e in error.context if e.relative_schema_path[0] == chosen]
            if inner:
                return [line for e in inner for line in self.explain(e)]
        best = best_match(error.context)
        return self.explain(best) if best is not None else [f"{error.json_path}: {error.message}"]

    def discriminated(self, error: ValidationError) -> int | None:
        kind = error.instance.get("type") if isinstance(error.instance, dict) else None
        if error.validator not in ("anyOf", "oneOf") or not isinstance(kind, str):
            return None
        for index, option in enumerate(error.validator_value):
            ref = option.get("$ref") if isinstance(option, dict) else None
            target = self.schemas.get(str(ref).rsplit("/", 1)[-1], {}) if ref else option
            if isinstance(target, dict) and kind in target.get("properties", {}).get("type", {}).get("enum", []):
                return index
        return None


@cache
def spec(filename: str) -> Spec:
    return Spec(filename)
