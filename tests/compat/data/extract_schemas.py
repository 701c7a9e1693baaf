"""Copy the answer schemas the spec-shape tests need out of a full OpenAPI spec, with every schema they
``$ref`` (transitively), unchanged, under the same JSON pointers (``#/components/schemas/X``).

    python tests/compat/data/extract_schemas.py openai <openai-openapi>/openapi.yaml <commit>
    python tests/compat/data/extract_schemas.py tei <text-embeddings-inference>/docs/openapi.json <commit>

writes ``openai_schemas.json`` or ``tei_openapi_schemas.json`` beside this script (README.md there names
the sources). Only the standard library and PyYAML (for the YAML spec).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PREFIX = "#/components/schemas/"

#: the answers of OpenAI's routes this server serves (POST /embeddings, /chat/completions (and its
#: stream's chunks), /completions, /moderations, /audio/transcriptions (json, verbose_json), /responses
#: (and its stream's events); GET /models, /models/{model}), and their error body
OPENAI_ROOTS = (
    "CreateEmbeddingResponse",
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "CreateCompletionResponse",
    "ListModelsResponse",
    "Model",
    "CreateModerationResponse",
    "CreateTranscriptionResponseJson",
    "CreateTranscriptionResponseVerboseJson",
    "Response",
    "ResponseStreamEvent",
    "ErrorResponse",
    # the Batch API (/v1/files, /v1/batches)
    "Batch",
    "OpenAIFile",
    "ListBatchesResponse",
    "ListFilesResponse",
    "DeleteFileResponse",
)
#: TEI's answers (and its error body) of /embed, /embed_sparse, /embed_all, /rerank, /predict,
#: /similarity, /tokenize, /decode and /info
TEI_ROOTS = (
    "EmbedResponse",
    "EmbedSparseResponse",
    "EmbedAllResponse",
    "RerankResponse",
    "PredictResponse",
    "SimilarityResponse",
    "TokenizeResponse",
    "DecodeResponse",
    "Info",
    "ErrorResponse",
)
SOURCES: dict[str, dict[str, Any]] = {
    "openai": {
        "repository": "https://github.com/openai/openai-openapi",
        "path": "openapi.yaml",
        "licence": "MIT",
        "roots": OPENAI_ROOTS,
        "out": "openai_schemas.json",
    },
    "tei": {
        "repository": "https://github.com/huggingface/text-embeddings-inference",
        "path": "docs/openapi.json",
        "licence": "Apache-2.0",
        "roots": TEI_ROOTS,
        "out": "tei_openapi_schemas.json",
    },
}


def load(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        loaded: dict[str, Any] = yaml.safe_load(text)
        return loaded
    spec: dict[str, Any] = json.loads(text)
    return spec


def refs(node: Any) -> set[str]:
    """The component schema names ``node`` refers to with ``$ref``."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                if not value.startswith(PREFIX):
                    raise ValueError(f"a $ref outside the component schemas: {value}")
                found.add(value.removeprefix(PREFIX))
            else:
                found |= refs(value)
    elif isinstance(node, list):
        for value in node:
            found |= refs(value)
    return found


def closure(schemas: dict[str, Any], roots: tuple[str, ...]) -> dict[str, Any]:
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(refs(schemas[name]) - seen)
    return {name: schemas[name] for name in sorted(seen)}


def extract(kind: str, spec_path: Path, commit: str) -> Path:
    source = SOURCES[kind]
    spec = load(spec_path)
    picked = closure(spec["components"]["schemas"], source["roots"])
    document = {
        "source": {
            "repository": source["repository"],
            "path": source["path"],
            "commit": commit,
            "licence": source["licence"],
            "openapi": spec["openapi"],
            "version": spec["info"]["version"],
            "roots": list(source["roots"]),
        },
        "components": {"schemas": picked},
    }
    out = HERE / str(source["out"])
    # default=str: YAML reads an unquoted date in an example as a date
    out.write_text(json.dumps(document, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] not in SOURCES:
        print(__doc__, file=sys.stderr)
        return 2
    out = extract(argv[1], Path(argv[2]), argv[3])
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
