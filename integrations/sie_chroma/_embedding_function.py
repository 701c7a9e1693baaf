"""``SIEEmbeddingFunction``: Chroma's ``EmbeddingFunction[Documents]`` on an SIE encode model."""

from __future__ import annotations

from typing import Any, Literal

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, SIEBackend
from sie_sdk.types import Priority

NAME = "sie"
_CONFIG_KEYS = ("model", "base_url", "priority", "instruction", "batch_size", "timeout")


@register_embedding_function
class SIEEmbeddingFunction(EmbeddingFunction[Documents]):
    """Dense embeddings from an SIE server for a Chroma collection.

    Documents are encoded as documents; ``embed_query`` (which Chroma uses for
    ``query_texts``) encodes with ``is_query=True`` (query prefix, or ``instruction``).
    ``base_url=None`` means ``$SIE_URL`` (else http://127.0.0.1:8080) at each call, and is
    stored as ``None`` in the collection's config so a reopened collection follows
    ``$SIE_URL`` too. The default space is cosine. ``api_key`` (``None``: ``$SIE_API_KEY``) is
    never written to the collection's config: a reopened collection reads ``$SIE_API_KEY``.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        priority: Priority | None = None,
        instruction: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        space: Literal["cosine", "l2", "ip"] = "cosine",
        api_key: str | None = None,
    ) -> None:
        self._backend = SIEBackend(
            model,
            base_url=base_url,
            priority=priority,
            instruction=instruction,
            batch_size=batch_size,
            timeout=timeout,
            api_key=api_key,
        )
        self._space: Space = space

    def __call__(self, input: Documents) -> Embeddings:
        return self._embed(input, is_query=False)

    def embed_query(self, input: Documents) -> Embeddings:
        return self._embed(input, is_query=True)

    def _embed(self, texts: Documents, *, is_query: bool) -> Embeddings:
        return [vector for vector in self._backend.arrays(list(texts), is_query=is_query)]

    @staticmethod
    def name() -> str:
        return NAME

    def default_space(self) -> Space:
        return self._space

    def supported_spaces(self) -> list[Space]:
        return ["cosine", "ip", "l2"]

    def get_config(self) -> dict[str, Any]:
        backend = self._backend
        return {
            "model": backend.model,
            "base_url": backend.base_url_setting,
            "priority": backend.priority,
            "instruction": backend.instruction,
            "batch_size": backend.batch_size,
            "timeout": backend.timeout,
            "space": self._space,
        }

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> SIEEmbeddingFunction:
        SIEEmbeddingFunction.validate_config(config)
        settings = {key: config[key] for key in _CONFIG_KEYS if config.get(key) is not None}
        return SIEEmbeddingFunction(**settings, space=config.get("space") or "cosine")

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        if not isinstance(config.get("model"), str) or not config["model"]:
            raise ValueError("the sie embedding function config needs a model id")

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        if "model" in new_config and new_config["model"] != old_config.get("model"):
            raise ValueError("the model of an sie embedding function cannot change: its vectors would not match")

    def __repr__(self) -> str:
        return f"SIEEmbeddingFunction(model={self._backend.model!r}, base_url={self._backend.base_url!r})"
