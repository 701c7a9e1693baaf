"""MkDocs hook: the HTTP reference, generated at build time from the server's own OpenAPI spec.

The spec is the one a running server serves at ``/openapi.json``: ``create_api`` builds the same app
(the same routers, the same ``api/openapi.py`` descriptions) over no service, which a spec does not
call. The hook adds three files to the site: ``reference/openapi.json`` (the spec), ``reference/http.md``
(every route: parameters, body, answers and error codes) and ``reference/schemas.md`` (every body and
answer model, field by field).
"""

from __future__ import annotations

import json
import re
from typing import Any

SCHEMAS_PAGE = "schemas.md"
TAG_TITLES = {
    "health": "Health and probes",
    "status": "Status",
    "models": "Models and memory",
    "work": "Native work routes",
    "generate": "Generation",
    "compatible": "OpenAI, Cohere, Jina and vLLM compatible",
    "ollama": "Ollama",
    "TEI": "Text Embeddings Inference (TEI)",
    "batches": "Batch API",
    "tasks": "Tasks",
}


def build_spec() -> dict[str, Any]:
    from sie_server.api.app import create_api

    spec: dict[str, Any] = create_api(None, title="SIE").openapi()  # type: ignore[arg-type]
    return spec


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def schema_anchor(name: str) -> str:
    return f"schema-{name}"


def type_of(schema: dict[str, Any], page: str = SCHEMAS_PAGE) -> str:
    """A JSON schema as a short Markdown type: references link to their model on the schemas page."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}]({page}#{schema_anchor(name)})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(type_of(part, page) for part in schema[key])
    if "allOf" in schema:
        return " and ".join(type_of(part, page) for part in schema["allOf"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " or ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        return f"array of {type_of(items, page)}" if isinstance(items, dict) and items else "array"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of {type_of(schema['additionalProperties'], page)}"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return str(kind) if kind else "any"


def _body(operation: dict[str, Any]) -> list[str]:
    body = operation.get("requestBody")
    if not body:
        return []
    content: dict[str, Any] = body.get("content", {})
    shapes: dict[str, list[str]] = {}
    for media, entry in content.items():
        shapes.setdefault(type_of(entry.get("schema", {})), []).append(f"`{media}`")
    lines = ["**Body**" + (" (required)" if body.get("required") else "") + ":", ""]
    lines += [f"- {shape} as {', '.join(medias)}" for shape, medias in shapes.items()]
    return [*lines, ""]


def _parameters(operation: dict[str, Any]) -> list[str]:
    params = operation.get("parameters") or []
    if not params:
        return []
    lines = ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
    for param in params:
        schema = param.get("schema", {})
        description = param.get("description") or schema.get("description") or ""
        lines.append(
            f"| `{param['name']}` | {param['in']} | {type_of(schema)} | {'yes' if param.get('required') else 'no'} "
            f"| {_cell(description)} |"
        )
    return [*lines, ""]


def _responses(operation: dict[str, Any]) -> list[str]:
    lines = ["| status | answer | when |", "|---|---|---|"]
    for status, answer in sorted(operation.get("responses", {}).items()):
        content: dict[str, Any] = answer.get("content") or {}
        shapes = sorted({type_of(entry.get("schema", {})) for entry in content.values() if entry.get("schema")})
        medias = ", ".join(f"`{media}`" for media in content)
        shape = " or ".join(shapes) or "-"
        media_note = f" as {medias}" if medias else ""
        lines.append(f"| {status} | {shape}{media_note} | {_cell(answer.get('description', ''))} |")
    return [*lines, ""]


def operation_anchor(method: str, path: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")
    return f"{method.lower()}-{slug}" if slug else f"{method.lower()}-root"


def routes_markdown(spec: dict[str, Any]) -> str:
    """One section per tag, one entry per route, in the order the server registers them."""
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            tag = (operation.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append((method.upper(), path, operation))
    info = spec["info"]
    out = [
        "# HTTP reference",
        "",
        f"Generated when this site was built from the server's own OpenAPI spec ({info['title']} "
        f"{info['version']}, OpenAPI {spec['openapi']}): the spec a running server serves at `/openapi.json`, "
        "with Swagger UI at `/docs` and ReDoc at `/redoc` (offline). Download it: [openapi.json](openapi.json). "
        "Every body and answer model is on [Schemas](schemas.md). The MCP endpoint `/mcp` is one JSON-RPC "
        "route and is not in the spec (see [MCP](../compatibility/mcp.md)).",
        "",
        _cell(info.get("description", "")),
        "",
    ]
    for tag, entries in by_tag.items():
        out += [f"## {TAG_TITLES.get(tag, tag)}", ""]
        for method, path, operation in entries:
            out += [f"### `{method} {path}` {{#{operation_anchor(method, path)}}}", ""]
            summary = operation.get("summary")
            if summary:
                out += [f"*{summary}*", ""]
            if operation.get("description"):
                out += [operation["description"].strip(), ""]
            out += _parameters(operation) + _body(operation) + _responses(operation)
    return "\n".join(out) + "\n"


def schemas_markdown(spec: dict[str, Any]) -> str:
    """Every model of the spec's components: its fields, their types, whether required, their descriptions."""
    out = [
        "# Schemas",
        "",
        "The request and answer models of the [HTTP reference](http.md), generated from the server's OpenAPI "
        "spec. Unknown fields are refused unless a model says otherwise.",
        "",
    ]
    for name, schema in sorted(spec.get("components", {}).get("schemas", {}).items(), key=lambda kv: kv[0].lower()):
        out += [f"### {name} {{#{schema_anchor(name)}}}", ""]
        if schema.get("description"):
            out += [_cell(schema["description"]), ""]
        properties: dict[str, Any] = schema.get("properties") or {}
        if not properties:
            out += [f"Type: {type_of(schema, '')}", ""]
            continue
        required = set(schema.get("required", []))
        out += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, prop in properties.items():
            description = prop.get("description", "")
            if "default" in prop and prop["default"] is not None:
                description = f"{description} (default `{json.dumps(prop['default'])}`)".strip()
            out.append(
                f"| `{field}` | {type_of(prop, '')} | {'yes' if field in required else 'no'} | {_cell(description)} |"
            )
        out.append("")
    return "\n".join(out) + "\n"


def on_files(files: Any, config: Any, **kwargs: Any) -> Any:
    from mkdocs.structure.files import File

    spec = build_spec()
    for uri, content in (
        ("reference/openapi.json", json.dumps(spec, indent=2) + "\n"),
        ("reference/http.md", routes_markdown(spec)),
        ("reference/schemas.md", schemas_markdown(spec)),
    ):
        files.append(File.generated(config, uri, content=content))
    return files
