"""LangChain's own standard suites (``langchain-tests``) for SIEEmbeddings and SIEChatModel.

The chat integration suite runs on the packaged SmolLM2 (llama.cpp), which the shared server serves:
its tool-calling tests check the arguments a model chose (``magic_function(input=3)``), which random
weights cannot give; the server constrains every forced call, so each parses. The suites' own skips
(image/audio/PDF input, JSON mode, ... which SIEChatModel does not offer) are counted in
tests/skip_budget.toml.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_tests.integration_tests import ChatModelIntegrationTests, EmbeddingsIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests, EmbeddingsUnitTests

from sie_langchain import SIEChatModel, SIEEmbeddings
from tests.helpers.catalog import SMOLLM
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
        require_model(base_url, SMOLLM)
        self._base_url = base_url

    @property
    def chat_model_class(self) -> type[SIEChatModel]:
        return SIEChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        # greedy and short: a tool call fits in 128 tokens. SmolLM2-135M, greedy, writes free-text strings (a
        # joke's setup, a greeting's style) as loops ("a cat is a cat, right? a cat is a cat, ...") until
        # max_tokens; OpenAI's frequency penalty, as a user of so small a model sets it, ends them
        return {"model": SMOLLM, "base_url": self._base_url, "max_tokens": 128, "temperature": 0,
                "frequency_penalty": 1.0}  # fmt: skip

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def supports_model_override(self) -> bool:
        return True  # invoke(..., model=...)

    @property
    def model_override_value(self) -> str:
        return TINY_LLM_B
