"""``SIEChatGenerator``: a Haystack chat generator on an SIE generate model, through the server's
``/v1/chat/completions`` (tools and ``response_format`` included); with a ``streaming_callback``, its
``/v1/generate`` stream, each delta handed over as a ``StreamingChunk``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from haystack import component, default_from_dict
from haystack.dataclasses import ChatMessage, StreamingChunk, ToolCall
from haystack.tools.serde_utils import deserialize_tools_or_toolset_inplace, serialize_tools_or_toolset
from haystack.tools.tool import Tool
from haystack.tools.toolset import Toolset
from haystack.tools.utils import flatten_tools_or_toolsets
from haystack.utils import Secret, deserialize_callable, deserialize_secrets_inplace, serialize_callable

from sie_integrations_base import DEFAULT_TIMEOUT_S, ChatAnswer, chat_completion, function_tool
from sie_sdk.types import Message

from ._common import SIEComponent

StreamingCallback = Callable[[StreamingChunk], None]
Tools = list[Tool | Toolset] | Toolset


def _generate_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's names, as Haystack's generators take them (``max_tokens``), in the SDK's (``max_new_tokens``)."""
    params = dict(kwargs)
    if "max_tokens" in params:
        params["max_new_tokens"] = params.pop("max_tokens")
    return params


def _reply(answer: ChatAnswer, model: str) -> ChatMessage:
    calls = [
        ToolCall(tool_name=call.name, arguments=call.arguments, id=call.id)
        for call in answer.tool_calls
        if isinstance(call.arguments, dict)
    ]
    meta = {"model": model, "index": 0, "finish_reason": answer.finish_reason, "usage": answer.usage or {}}
    return ChatMessage.from_assistant(answer.content or None, meta=meta, tool_calls=calls or None)


@component
class SIEChatGenerator(SIEComponent):
    """``run(messages=[ChatMessage, ...], generation_kwargs=None, tools=None, streaming_callback=None)``
    gives ``{"replies": [ChatMessage]}`` with ``meta`` ``model``, ``finish_reason`` and ``usage``.

    ``generation_kwargs``: ``max_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``, ``tool_choice``,
    ``response_format``; per call they update the constructor's. ``tools``: Haystack ``Tool``s whose calls
    come back as the reply's ``tool_calls`` (the component does not run them). A stream carries no tools.
    """

    def __init__(
        self,
        model: str,
        *,
        generation_kwargs: dict[str, Any] | None = None,
        tools: Tools | None = None,
        streaming_callback: StreamingCallback | None = None,
        base_url: str | None = None,
        priority: Literal["interactive", "batch"] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        api_key: Secret | None = None,
    ) -> None:
        SIEComponent.__init__(self, model, base_url=base_url, priority=priority, timeout=timeout, api_key=api_key)
        self.generation_kwargs = dict(generation_kwargs or {})
        self.tools = tools
        self.streaming_callback = streaming_callback

    def _init_parameters(self) -> dict[str, Any]:
        return {
            "generation_kwargs": self.generation_kwargs,
            "tools": serialize_tools_or_toolset(self.tools),
            "streaming_callback": serialize_callable(self.streaming_callback) if self.streaming_callback else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SIEChatGenerator:
        params = data["init_parameters"]
        deserialize_secrets_inplace(params, keys=["api_key"])
        deserialize_tools_or_toolset_inplace(params, key="tools")
        if params.get("streaming_callback"):
            params["streaming_callback"] = deserialize_callable(params["streaming_callback"])
        return default_from_dict(cls, data)

    @component.output_types(replies=list[ChatMessage])
    def run(
        self,
        messages: list[ChatMessage],
        generation_kwargs: dict[str, Any] | None = None,
        tools: Tools | None = None,
        streaming_callback: StreamingCallback | None = None,
    ) -> dict[str, Any]:
        params = _generate_kwargs({**self.generation_kwargs, **(generation_kwargs or {})})
        chosen = flatten_tools_or_toolsets(tools if tools is not None else self.tools)
        callback = streaming_callback or self.streaming_callback
        wire = [message.to_openai_dict_format(require_tool_call_ids=False) for message in messages]
        if callback is not None:
            if chosen:
                raise ValueError("SIEChatGenerator streams without tools: pass tools or a streaming_callback")
            return {"replies": [self._stream(wire, params, callback)]}
        if chosen:
            params["tools"] = [function_tool(t.name, t.description, t.parameters) for t in chosen]
        return {"replies": [_reply(chat_completion(self.backend, wire, **params), self.model)]}

    def _stream(self, wire: list[dict[str, Any]], params: dict[str, Any], callback: StreamingCallback) -> ChatMessage:
        messages: list[Message] = [{"role": m["role"], "content": m.get("content") or ""} for m in wire]
        pieces: list[str] = []
        finish: str | None = None
        usage: dict[str, Any] = {}
        for k, chunk in enumerate(self.backend.stream(messages=messages, **params)):
            text = chunk.get("text") or ""
            finish = chunk.get("finish_reason") or finish
            usage = dict(chunk.get("usage") or usage)
            pieces.append(text)
            callback(StreamingChunk(content=text, meta={"model": self.model}, index=0, start=k == 0))
        meta = {"model": self.model, "index": 0, "finish_reason": finish, "usage": usage}
        return ChatMessage.from_assistant("".join(pieces), meta=meta)
