"""``SIELLM``: a LlamaIndex ``FunctionCallingLLM`` on SIE's generate and chat completions routes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.tools.types import BaseTool

from sie_integrations_base import CHAT_OPTIONS, achat_completion, chat_completion
from sie_sdk.types import GenerateChunk, GenerateResult, Message

from . import _tools
from ._common import SIEFields

_CALL_PARAMS = frozenset({"temperature", "max_new_tokens", "max_tokens", "top_p", "stop", "seed"})


def _extra(answer: GenerateResult | GenerateChunk) -> dict[str, Any]:
    return {"finish_reason": answer.get("finish_reason"), "usage": answer.get("usage")}


class SIELLM(SIEFields, FunctionCallingLLM):
    """An LLM served by SIE (``/v1/generate``), and a function-calling one (``/v1/chat/completions``).

    ``complete`` sends a prompt; ``chat`` sends the messages as they are (the server applies
    the model's chat template). ``instruction`` is the system message of a conversation that
    has none (and is put before a bare prompt). Usage (token counts) and the finish reason are
    in each response's ``additional_kwargs``.

    Tools (``chat_with_tools``, ``predict_and_call``) and ``structured_predict`` go to the
    chat completions route: calls come back as ``ToolCallBlock``s, and a required or named tool
    choice is decoded under its schema, so the call always parses. A call or a structured answer
    streams as one chunk (the server knows its calls once the whole JSON object is decoded).
    """

    context_window: int = Field(default=2048, gt=0, description="The model's context, in tokens.")
    num_output: int = Field(default=256, gt=0, description="max_new_tokens per call.")
    temperature: float | None = Field(default=None, description="Sampling temperature (None: server default).")
    top_p: float | None = Field(default=None)
    stop: list[str] | None = Field(default=None)
    seed: int | None = Field(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "SIELLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.num_output,
            is_chat_model=True,
            is_function_calling_model=True,
            model_name=self.model,
        )

    def _params(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        unknown = set(kwargs) - _CALL_PARAMS
        if unknown:
            raise TypeError(f"SIELLM does not take {sorted(unknown)}")
        return {
            "max_new_tokens": kwargs.get("max_new_tokens", kwargs.get("max_tokens", self.num_output)),
            "temperature": kwargs.get("temperature", self.temperature),
            "top_p": kwargs.get("top_p", self.top_p),
            "stop": kwargs.get("stop", self.stop),
            "seed": kwargs.get("seed", self.seed),
        }

    def _prompt(self, prompt: str, formatted: bool) -> str:
        if not formatted and self.completion_to_prompt is not None:
            prompt = self.completion_to_prompt(prompt)
        return f"{self.instruction}\n\n{prompt}" if self.instruction else prompt

    def _split(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(generate parameters, chat-only options given a value) of one call's arguments."""
        options = {key: kwargs[key] for key in CHAT_OPTIONS & set(kwargs) if kwargs[key] is not None}
        return self._params({k: v for k, v in kwargs.items() if k not in CHAT_OPTIONS}), options

    def _messages(self, messages: Sequence[ChatMessage]) -> list[Message]:
        converted: list[Message] = [{"role": m.role.value, "content": m.content or ""} for m in messages]
        system = self.instruction or self.system_prompt
        if system and not any(m["role"] == "system" for m in converted):
            converted.insert(0, {"role": "system", "content": system})
        return converted

    # --- completion ----------------------------------------------------------------------

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        answer = self.backend.generate(self._prompt(prompt, formatted), **self._params(kwargs))
        return CompletionResponse(text=answer.get("text", ""), raw=dict(answer), additional_kwargs=_extra(answer))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        chunks = self.backend.stream(self._prompt(prompt, formatted), **self._params(kwargs))

        def gen() -> CompletionResponseGen:
            text = ""
            for chunk in chunks:
                delta = chunk.get("text") or ""
                text += delta
                yield CompletionResponse(text=text, delta=delta, raw=dict(chunk), additional_kwargs=_extra(chunk))

        return gen()

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        answer = await self.backend.agenerate(self._prompt(prompt, formatted), **self._params(kwargs))
        return CompletionResponse(text=answer.get("text", ""), raw=dict(answer), additional_kwargs=_extra(answer))

    @llm_completion_callback()
    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseAsyncGen:
        params = self._params(kwargs)
        full_prompt = self._prompt(prompt, formatted)

        async def gen() -> CompletionResponseAsyncGen:
            text = ""
            async for chunk in self.backend.astream(full_prompt, **params):
                delta = chunk.get("text") or ""
                text += delta
                yield CompletionResponse(text=text, delta=delta, raw=dict(chunk), additional_kwargs=_extra(chunk))

        return gen()

    # --- chat ----------------------------------------------------------------------------

    @staticmethod
    def _chat_response(text: str, answer: GenerateResult | GenerateChunk, delta: str | None = None) -> ChatResponse:
        message = ChatMessage(role=MessageRole.ASSISTANT, content=text)
        return ChatResponse(message=message, delta=delta, raw=dict(answer), additional_kwargs=_extra(answer))

    def _chat_route(self, messages: Sequence[ChatMessage], options: dict[str, Any]) -> bool:
        return bool(options) or _tools.uses_tools(messages)

    def _openai_messages(self, messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
        return _tools.openai_messages(messages, self.instruction or self.system_prompt)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        params, options = self._split(kwargs)
        if self._chat_route(messages, options):
            answer = chat_completion(self.backend, self._openai_messages(messages), **params, **options)
            return _tools.chat_response(answer)
        generated = self.backend.generate(messages=self._messages(messages), **params)
        return self._chat_response(generated.get("text", ""), generated)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        params, options = self._split(kwargs)
        if self._chat_route(messages, options):  # a call or a structured answer comes whole: one chunk
            answer = chat_completion(self.backend, self._openai_messages(messages), **params, **options)
            whole = _tools.chat_response(answer, streamed=True)

            def once() -> ChatResponseGen:
                yield whole

            return once()
        chunks = self.backend.stream(messages=self._messages(messages), **params)

        def gen() -> ChatResponseGen:
            text = ""
            for chunk in chunks:
                delta = chunk.get("text") or ""
                text += delta
                yield self._chat_response(text, chunk, delta)

        return gen()

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        params, options = self._split(kwargs)
        if self._chat_route(messages, options):
            answer = await achat_completion(self.backend, self._openai_messages(messages), **params, **options)
            return _tools.chat_response(answer)
        generated = await self.backend.agenerate(messages=self._messages(messages), **params)
        return self._chat_response(generated.get("text", ""), generated)

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        params, options = self._split(kwargs)
        if self._chat_route(messages, options):
            answer = await achat_completion(self.backend, self._openai_messages(messages), **params, **options)
            whole = _tools.chat_response(answer, streamed=True)

            async def once() -> ChatResponseAsyncGen:
                yield whole

            return once()
        sie_messages = self._messages(messages)

        async def gen() -> ChatResponseAsyncGen:
            text = ""
            async for chunk in self.backend.astream(messages=sie_messages, **params):
                delta = chunk.get("text") or ""
                text += delta
                yield self._chat_response(text, chunk, delta)

        return gen()

    # --- function calling ----------------------------------------------------------------

    def _prepare_chat_with_tools(
        self,
        tools: Sequence[BaseTool],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """``chat``'s arguments: the conversation, the tools, the tool choice (``tool_required`` or a
        named tool force a call), and one call unless ``allow_parallel_tool_calls``."""
        messages = list(chat_history or [])
        if isinstance(user_msg, str):
            messages.append(ChatMessage(role=MessageRole.USER, content=user_msg))
        elif user_msg is not None:
            messages.append(user_msg)
        specs = _tools.openai_tools(tools)
        if not specs:
            return {"messages": messages, **kwargs}
        return {
            "messages": messages,
            "tools": specs,
            "tool_choice": _tools.openai_tool_choice(tool_choice, tool_required),
            "parallel_tool_calls": allow_parallel_tool_calls,
            **kwargs,
        }

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        """The response's tool calls, arguments parsed; ``ValueError`` when a call was expected and none came."""
        return _tools.tool_selections(response, error_on_no_tool_call)
