"""Wire models of OpenAI's Responses API (``POST /v1/responses``), stateless: ``input`` as a string or
items (messages, ``function_call`` and ``function_call_output``), ``instructions``, ``max_output_tokens``,
``temperature``, ``top_p``, ``text.format`` and function ``tools``; the answer's ``output`` items and
``usage``; the stream's events."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from sie_server.contract.grammar_wire import GrammarIn
from sie_server.contract.ignored import Compatible, list_ignored
from sie_server.contract.requests import Seed, Temperature, Whole
from sie_server.contract.tools_wire import (
    ChatMessageIn,
    FunctionCall,
    FunctionSpec,
    NamedFunction,
    NamedToolChoice,
    Tool,
    ToolCall,
    ToolChoice,
)
from sie_server.contract.wire import KeepNone
from sie_server.errors import InvalidInput


class _Open(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, populate_by_name=True)


class TextFormat(_Open):
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextConfig(_Open):
    format: TextFormat = Field(default_factory=TextFormat)


class FunctionTool(_Open):
    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamedFunctionChoice(_Open):
    type: Literal["function"]
    name: str


class ResponsesRequest(Compatible):
    IGNORED = ("user", "store", "metadata", "service_tier", "prompt_cache_key", "safety_identifier")
    model_config = ConfigDict(extra="ignore", strict=True, populate_by_name=True, json_schema_extra=list_ignored)
    model: str
    input: str | list[dict[str, Any]] = Field(min_length=1)
    instructions: str | None = None
    max_output_tokens: Whole | None = Field(default=None, ge=1)
    temperature: Temperature = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    text: TextConfig | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedFunctionChoice | None = None
    parallel_tool_calls: bool = False  # as on chat completions (llama.cpp's server's default)
    stream: bool = False
    seed: Seed | None = None
    previous_response_id: str | None = None

    def grammar(self) -> GrammarIn | None:
        found = self.text.format if self.text is not None else None
        if found is None or found.type == "text":
            return None
        if found.type == "json_object" or found.schema_ is None:
            return GrammarIn(json_schema={"type": "object"})
        return GrammarIn(json_schema=found.schema_, strict=found.strict is not False)

    def chat_tools(self) -> list[Tool] | None:
        if not self.tools:
            return None
        tools = []
        for index, t in enumerate(self.tools):
            try:
                tools.append(Tool(function=FunctionSpec(name=t.name, description=t.description, strict=t.strict,
                                  **({"parameters": t.parameters} if t.parameters is not None else {}))))  # fmt: skip
            except ValidationError as exc:  # a name the chat route's tools refuse: this request's 400
                reason = "; ".join(str(e["msg"]) for e in exc.errors())
                raise InvalidInput(f"tools[{index}]: {reason}") from None
        return tools

    def chat_tool_choice(self) -> ToolChoice | None:
        if isinstance(self.tool_choice, NamedFunctionChoice):
            return NamedToolChoice(function=NamedFunction(name=self.tool_choice.name))
        return self.tool_choice

    def messages(self) -> list[ChatMessageIn]:
        """``instructions`` and ``input`` as chat messages; ValueError naming an item this server cannot read."""
        out = [ChatMessageIn(role="system", content=self.instructions)] if self.instructions else []
        if isinstance(self.input, str):
            return [*out, ChatMessageIn(role="user", content=self.input)]
        for k, item in enumerate(self.input):
            kind = item.get("type", "message")
            if kind == "message":
                out.append(ChatMessageIn(role=item.get("role", "user"), content=_text(item.get("content"), k)))
            elif kind == "function_call":
                function = FunctionCall(name=str(item.get("name", "")), arguments=str(item.get("arguments", "{}")))
                call = ToolCall(id=str(item.get("call_id", "")), function=function)
                out.append(ChatMessageIn(role="assistant", tool_calls=[call]))
            elif kind == "function_call_output":
                output = item.get("output")
                text = output if isinstance(output, str) else _text(output, k)
                out.append(ChatMessageIn(role="tool", tool_call_id=str(item.get("call_id", "")), content=text))
            else:
                raise ValueError(f"input[{k}] is of type {kind!r}; this server reads messages and function calls")
        return out


def _text(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValueError(f"input[{index}].content must be a string or a list of text parts")
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text", "text"):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise ValueError(f"input[{index}].content holds a {kind!r} part; this server reads text parts")
        texts.append(str(part.get("text", "")))
    return "".join(texts)


class OutputText(KeepNone):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Any] = Field(default_factory=list)
    logprobs: list[Any] = Field(default_factory=list)  # OpenAI's spec requires the list; none are computed here


class OutputMessage(KeepNone):
    type: Literal["message"] = "message"
    id: str
    status: Literal["completed", "incomplete", "in_progress"] = "completed"
    role: Literal["assistant"] = "assistant"
    content: list[OutputText]


class FunctionCallItem(KeepNone):
    type: Literal["function_call"] = "function_call"
    id: str
    call_id: str
    name: str
    arguments: str
    status: Literal["completed"] = "completed"


class TokenDetails(KeepNone):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class OutputDetails(KeepNone):
    reasoning_tokens: int = 0


class ResponsesUsage(KeepNone):
    input_tokens: int
    input_tokens_details: TokenDetails = Field(default_factory=TokenDetails)
    output_tokens: int
    output_tokens_details: OutputDetails = Field(default_factory=OutputDetails)
    total_tokens: int


class Incomplete(KeepNone):
    reason: Literal["max_output_tokens"] = "max_output_tokens"


class ResponseObject(KeepNone):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["completed", "incomplete", "in_progress"]
    incomplete_details: Incomplete | None = None
    error: None = None
    model: str
    output: list[OutputMessage | FunctionCallItem]
    instructions: str | None = None
    max_output_tokens: int | None = None
    parallel_tool_calls: bool = True
    temperature: float | None = None
    top_p: float | None = None
    tool_choice: Any = "auto"
    tools: list[Any] = Field(default_factory=list)
    text: Any = None
    metadata: dict[str, str] = Field(default_factory=dict)
    usage: ResponsesUsage | None = None

    # no return annotation, so the spec still shows the fields (as ``ShownSparse``)
    @model_serializer(mode="wrap")
    def _usage_when_done(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        """``usage`` once the response is done, absent before: OpenAI's spec has it an object, never null."""
        dumped: dict[str, Any] = handler(self)
        if dumped.get("usage") is None:
            dumped.pop("usage", None)
        return dumped


class ResponseStreamEvent(BaseModel):
    """One server-sent event of a streamed response (``stream: true``), as OpenAI's Responses API streams
    them: ``event:`` names its type (``response.created``, ``response.output_text.delta``, ...,
    ``response.completed``) and ``data:`` is that event as JSON (its ``type``, its ``sequence_number``
    and the fields the type carries: the response, an item, a delta)."""

    model_config = ConfigDict(extra="allow")
    event: str
    data: str = Field(json_schema_extra={"contentMediaType": "application/json"})
