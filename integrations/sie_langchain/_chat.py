"""``SIEChatModel`` (LangChain ``BaseChatModel``) and ``SIELLM`` (``LLM``) on SIE's generate route."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from operator import itemgetter
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
from langchain_core.language_models.chat_models import agenerate_from_stream, generate_from_stream
from langchain_core.language_models.llms import LLM
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult, GenerationChunk
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.utils.function_calling import convert_to_json_schema
from pydantic import BaseModel

from sie_sdk.types import GenerateChunk, GenerateResult, Message

from . import _tools
from ._common import SIEFields

PROVIDER = "sie"
# Per-call keyword arguments a caller may pass to invoke/stream (besides stop).
_CALL_PARAMS = frozenset(
    {"model", "temperature", "max_tokens", "max_new_tokens", "top_p", "seed", "frequency_penalty", "presence_penalty"}
)


def _chat_only(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's tools / tool choice / response format, taken out of ``kwargs``."""
    return {key: kwargs.pop(key) for key in list(kwargs) if key in _tools.CHAT_PARAMS}


class _GenerationFields(SIEFields):
    """Sampling settings shared by the chat model and the completion LLM."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    frequency_penalty: float | None = None  # OpenAI's: less of each token the more it was generated
    presence_penalty: float | None = None  # OpenAI's: less of each token once it was generated
    streaming: bool = False

    def _request(self, stop: list[str] | None, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The model and the generate parameters for one call (call arguments win)."""
        unknown = set(kwargs) - _CALL_PARAMS
        if unknown:
            raise TypeError(f"{type(self).__name__} does not take {sorted(unknown)}")
        max_new_tokens = kwargs.get("max_new_tokens", kwargs.get("max_tokens", self.max_tokens))
        params = {
            "max_new_tokens": max_new_tokens,
            "temperature": kwargs.get("temperature", self.temperature),
            "top_p": kwargs.get("top_p", self.top_p),
            "seed": kwargs.get("seed", self.seed),
            "frequency_penalty": kwargs.get("frequency_penalty", self.frequency_penalty),
            "presence_penalty": kwargs.get("presence_penalty", self.presence_penalty),
            "stop": (stop if stop is not None else self.stop) or None,
        }
        return str(kwargs.get("model") or self.model), params


def _usage(usage: Any) -> UsageMetadata | None:
    if not isinstance(usage, dict) or "prompt_tokens" not in usage:
        return None
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    total = int(usage.get("total_tokens") or prompt + completion)
    return UsageMetadata(input_tokens=prompt, output_tokens=completion, total_tokens=total)


def _role(message: BaseMessage) -> str:
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        return message.role
    raise TypeError(f"{type(message).__name__} cannot be sent to an SIE chat model")


def to_sie_messages(messages: Sequence[BaseMessage], instruction: str | None = None) -> list[Message]:
    """SIE chat messages; ``instruction`` becomes the system message when there is none."""
    converted: list[Message] = [{"role": _role(message), "content": message.text} for message in messages]
    if instruction and not any(message["role"] == "system" for message in converted):
        converted.insert(0, {"role": "system", "content": instruction})
    return converted


class SIEChatModel(_GenerationFields, BaseChatModel):
    """A chat model served by SIE (``/v1/generate`` with ``messages``).

    Streams token deltas; the last chunk carries ``usage_metadata`` (the server's token counts)
    and ``response_metadata`` (``model_name``, ``finish_reason``). ``max_tokens`` maps to the
    server's ``max_new_tokens``. ``instruction`` becomes a system message when the conversation
    has none. Pass ``model=`` to ``invoke`` to use another served model for one call.

    >>> chat = SIEChatModel(model="HuggingFaceTB/SmolLM2-135M-Instruct", max_tokens=64)
    >>> chat.invoke("What is SIE?").content
    """

    @property
    def _llm_type(self) -> str:
        return "sie-chat"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {**self._sie_identity(), "temperature": self.temperature, "max_tokens": self.max_tokens}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = LangSmithParams(
            ls_provider=PROVIDER,
            ls_model_name=str(kwargs.get("model") or self.model),
            ls_model_type="chat",
        )
        temperature = kwargs.get("temperature", self.temperature)
        if temperature is not None:
            params["ls_temperature"] = temperature
        max_tokens = kwargs.get("max_tokens", self.max_tokens)
        if max_tokens is not None:
            params["ls_max_tokens"] = max_tokens
        if stop or self.stop:
            params["ls_stop"] = stop or self.stop
        return params

    def _result(self, model: str, answer: GenerateResult) -> ChatResult:
        finish = answer.get("finish_reason")
        message = AIMessage(
            content=answer.get("text", ""),
            usage_metadata=_usage(answer.get("usage")),
            response_metadata={"model_name": model, "model_provider": PROVIDER, "finish_reason": finish},
        )
        generation = ChatGeneration(message=message, generation_info={"finish_reason": finish})
        return ChatResult(generations=[generation], llm_output={"model_name": model})

    def _chat_result(self, model: str, chat: dict[str, Any]) -> ChatResult:
        metadata = {"model_name": model, "model_provider": PROVIDER}
        message = _tools.answer_message(chat, _usage(chat.get("usage")), metadata)
        finish = message.response_metadata.get("finish_reason")
        generation = ChatGeneration(message=message, generation_info={"finish_reason": finish, "raw": chat})
        return ChatResult(generations=[generation], llm_output={"model_name": model})

    def _whole_chunks(self, result: ChatResult) -> Iterator[ChatGenerationChunk]:
        """A whole answer as stream chunks: its content and tool calls, then the closing chunk."""
        info = result.generations[0].generation_info or {}
        yield ChatGenerationChunk(message=_tools.answer_chunk(info["raw"]))
        message = result.generations[0].message
        usage = message.usage_metadata if isinstance(message, AIMessage) else None
        last = self._last(str(message.response_metadata.get("model_name")), info.get("finish_reason"), None)
        if isinstance(last.message, AIMessageChunk):
            last.message.usage_metadata = usage
        yield last

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | bool | dict[str, Any] | None = None,
        parallel_tool_calls: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """The model with tools (functions, pydantic classes, LangChain tools, OpenAI tool dicts) offered on
        every call; ``tool_choice``: auto, none, any / required, or a tool's name (a call always parses)."""
        bound: dict[str, Any] = {"tools": _tools.openai_tools(tools), **kwargs}
        if tool_choice is not None:
            bound["tool_choice"] = tool_choice
        if parallel_tool_calls is not None:
            bound["parallel_tool_calls"] = parallel_tool_calls
        return self.bind(**bound)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: Literal["function_calling", "json_schema", "json_mode"] = "function_calling",
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """Answers as ``schema``: by a forced tool call (``function_calling``), by a JSON-schema response
        format (``json_schema``) or as any JSON object (``json_mode``); the server constrains each."""
        if method == "function_calling":
            return super().with_structured_output(schema, include_raw=include_raw, **kwargs)
        if method == "json_schema":
            response_format = _tools.json_schema_format(schema, strict)
        else:
            response_format = {"type": "json_object"}
        model_class = schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None
        parser: Any = PydanticOutputParser(pydantic_object=model_class) if model_class else JsonOutputParser()
        structured = {"kwargs": {"method": method}, "schema": convert_to_json_schema(schema)}
        llm = self.bind(response_format=response_format, ls_structured_output_format=structured)
        if not include_raw:
            answer: Runnable[LanguageModelInput, dict[str, Any] | BaseModel] = llm | parser
            return answer
        parsed = RunnablePassthrough.assign(parsed=itemgetter("raw") | parser, parsing_error=lambda _: None)
        fallback = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=llm) | parsed.with_fallbacks([fallback], exception_key="parsing_error")

    @staticmethod
    def _delta(chunk: GenerateChunk) -> ChatGenerationChunk:
        return ChatGenerationChunk(message=AIMessageChunk(content=chunk.get("text") or ""))

    @staticmethod
    def _last(model: str, finish: Any, usage: Any) -> ChatGenerationChunk:
        """The closing chunk: usage and model name once, and ``chunk_position='last'``."""
        message = AIMessageChunk(
            content="",
            usage_metadata=_usage(usage),
            response_metadata={"model_name": model, "model_provider": PROVIDER, "finish_reason": finish},
            chunk_position="last",
        )
        return ChatGenerationChunk(message=message, generation_info={"finish_reason": finish})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        extra = _chat_only(kwargs)
        if self.streaming and not extra:
            return generate_from_stream(self._stream(messages, stop, run_manager, **kwargs))
        model, params = self._request(stop, kwargs)
        if extra:  # tools or a response format: OpenAI's chat route, where the server constrains the answer
            chat = self.backend.client.chat_completions(
                model, _tools.openai_messages(messages, self.instruction), **_tools.chat_options(params, extra)
            )
            return self._chat_result(model, chat)
        sie_messages = to_sie_messages(messages, self.instruction)
        return self._result(model, self.backend.generate(messages=sie_messages, model=model, **params))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        extra = _chat_only(kwargs)
        if self.streaming and not extra:
            return await agenerate_from_stream(self._astream(messages, stop, run_manager, **kwargs))
        model, params = self._request(stop, kwargs)
        if extra:
            async with self.backend.async_client() as client:
                chat = await client.chat_completions(
                    model, _tools.openai_messages(messages, self.instruction), **_tools.chat_options(params, extra)
                )
            return self._chat_result(model, chat)
        sie_messages = to_sie_messages(messages, self.instruction)
        return self._result(model, await self.backend.agenerate(messages=sie_messages, model=model, **params))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        if set(kwargs) & _tools.CHAT_PARAMS:  # a call or a structured answer comes whole: one chunk
            result = self._generate(messages, stop, run_manager, **kwargs)
            yield from self._whole_chunks(result)
            return
        model, params = self._request(stop, kwargs)
        finish, usage = None, None
        sie_messages = to_sie_messages(messages, self.instruction)
        for chunk in self.backend.stream(messages=sie_messages, model=model, **params):
            finish, usage = chunk.get("finish_reason") or finish, chunk.get("usage") or usage
            if chunk.get("text"):
                delta = self._delta(chunk)
                if run_manager is not None:
                    run_manager.on_llm_new_token(delta.text, chunk=delta)
                yield delta
        yield self._last(model, finish, usage)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        if set(kwargs) & _tools.CHAT_PARAMS:
            result = await self._agenerate(messages, stop, run_manager, **kwargs)
            for piece in self._whole_chunks(result):
                yield piece
            return
        model, params = self._request(stop, kwargs)
        finish, usage = None, None
        sie_messages = to_sie_messages(messages, self.instruction)
        async for chunk in self.backend.astream(messages=sie_messages, model=model, **params):
            finish, usage = chunk.get("finish_reason") or finish, chunk.get("usage") or usage
            if chunk.get("text"):
                delta = self._delta(chunk)
                if run_manager is not None:
                    await run_manager.on_llm_new_token(delta.text, chunk=delta)
                yield delta
        yield self._last(model, finish, usage)


class SIELLM(_GenerationFields, LLM):
    """A completion LLM served by SIE (``/v1/generate`` with ``prompt``).

    ``instruction`` is put before each prompt, separated by a blank line.
    """

    @property
    def _llm_type(self) -> str:
        return "sie"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {**self._sie_identity(), "temperature": self.temperature, "max_tokens": self.max_tokens}

    def _prompt(self, prompt: str) -> str:
        return f"{self.instruction}\n\n{prompt}" if self.instruction else prompt

    def _call(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> str:
        if self.streaming:
            return "".join(chunk.text for chunk in self._stream(prompt, stop, run_manager, **kwargs))
        model, params = self._request(stop, kwargs)
        answer = self.backend.generate(self._prompt(prompt), model=model, **params)
        return str(answer.get("text") or "")

    async def _acall(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> str:
        if self.streaming:
            return "".join([chunk.text async for chunk in self._astream(prompt, stop, run_manager, **kwargs)])
        model, params = self._request(stop, kwargs)
        answer = await self.backend.agenerate(self._prompt(prompt), model=model, **params)
        return str(answer.get("text") or "")

    def _stream(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[GenerationChunk]:
        model, params = self._request(stop, kwargs)
        for chunk in self.backend.stream(self._prompt(prompt), model=model, **params):
            piece = GenerationChunk(text=chunk.get("text") or "", generation_info=_info(chunk))
            if run_manager is not None:
                run_manager.on_llm_new_token(piece.text, chunk=piece)
            yield piece

    async def _astream(
        self,
        prompt: str,
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[GenerationChunk]:
        model, params = self._request(stop, kwargs)
        async for chunk in self.backend.astream(self._prompt(prompt), model=model, **params):
            piece = GenerationChunk(text=chunk.get("text") or "", generation_info=_info(chunk))
            if run_manager is not None:
                await run_manager.on_llm_new_token(piece.text, chunk=piece)
            yield piece


def _info(chunk: GenerateChunk) -> dict[str, Any] | None:
    if not chunk.get("finish_reason"):
        return None
    return {"finish_reason": chunk.get("finish_reason"), "usage": chunk.get("usage")}
