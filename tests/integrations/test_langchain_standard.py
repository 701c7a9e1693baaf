"""LangChain's own standard suites (``langchain-tests``) for SIEEmbeddings and SIEChatModel.

The chat suites need a generate model (``test/tiny-llm``), which the shared server serves. The
suites' own skips (tool calling, structured output, image/audio/PDF input, ... which SIEChatModel
does not offer) are counted in tests/skip_budget.toml.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_tests.integration_tests import ChatModelIntegrationTests, EmbeddingsIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests, EmbeddingsUnitTests

from sie_langchain import SIEChatModel, SIEEmbeddings
from tests.integrations.models import MINILM, TINY_LLM, TINY_LLM_B, require_model


class TestSIEEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[SIEEmbeddings]:
        return SIEEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"model": MINILM}

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        return {"SIE_URL": "http://127.0.0.1:9999"}, {"model": MINILM}, {"base_url": "http://127.0.0.1:9999"}


class TestSIEEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @pytest.fixture(autouse=True)
    def _server(self, base_url: str) -> None:
        self._base_url = base_url

    @property
    def embeddings_class(self) -> type[SIEEmbeddings]:
        return SIEEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"model": MINILM, "base_url": self._base_url}


class TestSIEChatModelUnit(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[SIEChatModel]:
        return SIEChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"model": TINY_LLM, "base_url": "http://127.0.0.1:9"}

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        return {"SIE_URL": "http://127.0.0.1:9999"}, {"model": TINY_LLM}, {"base_url": "http://127.0.0.1:9999"}


class TestSIEChatModelIntegration(ChatModelIntegrationTests):
    @pytest.fixture(autouse=True)
    def _server(self, base_url: str) -> None:
        require_model(base_url, TINY_LLM)
        self._base_url = base_url

    @property
    def chat_model_class(self) -> type[SIEChatModel]:
        return SIEChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        # Random weights: keep answers short; a seed keeps them reproducible.
        return {"model": TINY_LLM, "base_url": self._base_url, "max_tokens": 16, "seed": 0}

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def supports_model_override(self) -> bool:
        return True  # invoke(..., model=...)

    @property
    def model_override_value(self) -> str:
        return TINY_LLM_B
