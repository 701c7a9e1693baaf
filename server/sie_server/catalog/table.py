"""The catalog as a Markdown table (the table in docs/catalog.md is generated from the YAML files with it)."""

from __future__ import annotations

from collections.abc import Iterable

from sie_server.adapters.runtime.weights import describe
from sie_server.catalog.schema import ModelConfig

#: families in the order a reader meets them; any other family follows, alphabetically
FAMILY_ORDER = (
    "embedding",
    "decoder_embedding",
    "cross_encoder",
    "llm_reranker",
    "splade",
    "colbert",
    "bge_m3",
    "colpali",
    "clip",
    "gliner",
    "gliner2",
    "causal_lm",
)
HEADER = "| id | family | tasks and outputs | dims | max len | weights offline |\n|---|---|---|---|---|---|"


def _family_rank(adapter: str) -> tuple[int, str]:
    return (FAMILY_ORDER.index(adapter), "") if adapter in FAMILY_ORDER else (len(FAMILY_ORDER), adapter)


def _tasks(config: ModelConfig) -> str:
    parts = []
    for name in config.tasks.names():
        if name == "encode" and config.tasks.encode is not None:
            parts.append(f"encode ({'+'.join(config.tasks.encode.output_types())})")
        else:
            parts.append(name)
    return ", ".join(parts)


def _dims(config: ModelConfig) -> str:
    encode = config.tasks.encode
    if encode is None:
        return ""
    return ", ".join(f"{name} {getattr(encode, name).dim}" for name in encode.output_types())


def row(config: ModelConfig) -> str:
    source, offline = describe(config)
    weights = f"yes ({source})" if offline else "hub / cache"
    cells = [config.id, config.adapter, _tasks(config), _dims(config), str(config.max_sequence_length), weights]
    return "| " + " | ".join(cells) + " |"


def markdown_table(configs: Iterable[ModelConfig]) -> str:
    """One row per model: grouped by family, then by id (case-insensitively)."""
    ordered = sorted(configs, key=lambda c: (_family_rank(c.adapter), c.id.lower()))
    return "\n".join([HEADER, *(row(c) for c in ordered)])
