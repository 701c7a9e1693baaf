"""Refuse a prompt that cannot fit the model's context before rendering or tokenizing it.

Rendering a chat template and tokenizing the text cost time in proportion to the body: a chat of
20,000 one-word turns took ~15 s of CPU before the context-length check refused it. The bounds
here give a lower bound on the prompt's tokens from the request alone, in one pass that stops as
soon as the bound is crossed, so such a request costs microseconds per turn it needed to read:

- **Turns.** A turn of a role the template renders (``Generator.rendered_roles``, probed at load)
  costs at least one token of its own. Assumption: the template marks each turn it renders with
  something of its own (role tokens, separators), as every chat template in the catalog does; the
  load probe checks that it shows each probe turn's content, in order and apart from the others,
  and counts no role when it does not (guard templates that render only the last turns).
  Only turns with non-empty text content (a string, or a list of text parts, which the chat routes join
  as they are) and no tool calls are counted; with tools, consecutive turns of one role count once (a
  tool format may merge them: Gemma 3's does).
- **Bytes.** A tokenizer that covers every byte of its input gives a text of ``b`` bytes at least
  ``ceil(b / max_token_bytes)`` tokens (``Generator.max_token_bytes``, measured at load; 0 when
  unknown: then only the turn bound applies). For a chat, the content counted is what every template
  keeps at least: each counted turn's content stripped of surrounding whitespace (templates may trim
  it), and of an assistant turn only what follows its last ``</think>`` (reasoning templates drop the
  reasoning of earlier turns). Role names are not counted (templates may rename them).

A request these bounds let through has at most ``context_length - max_new_tokens`` counted turns
and that many tokens' worth of counted bytes, so what is rendered and tokenized after them is
bounded by the context, not by the body (``max_token_bytes`` of a byte-level vocabulary is a few
dozen bytes). The engine still counts the real tokens afterwards, exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sie_server.adapters.runtime.generator import Generator
from sie_server.errors import InvalidInput

THINK_END = "</think>"
# what a tool format may turn a role into before merging it with its neighbours (tool_formats/gemma3.py)
MERGED_AS = {"tool": "user", "developer": "system"}
# the part types whose texts a chat route joins into a turn's content (OpenAI's chat and Responses wires)
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def too_long(model_id: str, context_length: int, prompt: str, max_new_tokens: int) -> InvalidInput:
    """The one refusal for a prompt + max_new_tokens past the context; ``prompt`` says how long it is."""
    return InvalidInput(
        f"{prompt} + max_new_tokens ({max_new_tokens}) exceeds model {model_id}'s context length of "
        f"{context_length} tokens"
    )


def check(
    adapter: Generator,
    model_id: str,
    prompt: str | None,
    messages: Iterable[Mapping[str, Any]] | None,
    max_new_tokens: int,
    *,
    tools: bool = False,
) -> None:
    """InvalidInput (400) when the request alone shows the prompt cannot fit; otherwise nothing. Never
    renders nor tokenizes; stops reading the messages once the bound is crossed. ``tools``: the messages
    go through a tool format first (``tool_formats``), which may merge consecutive turns of one role."""
    room = adapter.context_length - max_new_tokens
    if messages is None:
        found = _prompt_past(prompt or "", room, adapter)
    else:
        found = _chat_past(messages, room, adapter, merged=tools)
    if found is not None:
        raise too_long(model_id, adapter.context_length, found, max_new_tokens)


def _prompt_past(prompt: str, room: int, adapter: Generator) -> str | None:
    """How long a raw prompt is at least, when that is more than ``room`` tokens."""
    per_token, size = adapter.max_token_bytes, len(prompt.encode("utf-8"))
    if per_token and size and size > room * per_token:
        return f"prompt ({size} bytes: at least {-(-size // per_token)} tokens)"
    return None


def _chat_past(messages: Iterable[Mapping[str, Any]], room: int, adapter: Generator, *, merged: bool) -> str | None:
    """How long a chat is at least, as soon as that is more than ``room`` tokens."""
    roles, per_token = adapter.rendered_roles, adapter.max_token_bytes
    most_bytes = room * per_token
    turns = size = 0
    last = None
    for message in messages:
        role, content = message.get("role"), _text(message.get("content"))
        if role not in roles or content is None or message.get("tool_calls"):
            continue  # a message with calls: a tool format may write the calls in place of its content
        if role == "assistant" and THINK_END in content:
            content = content.rsplit(THINK_END, 1)[1]
        content = content.strip()
        if not content:
            continue
        kind = MERGED_AS.get(role, role) if merged else role
        if not (merged and kind == last):
            turns += 1
        last = kind
        size += len(content.encode("utf-8"))
        if turns > room:
            return f"the chat (at least {turns} turns, a token each)"
        if per_token and size > most_bytes:
            return f"the chat (at least {size} bytes of content: at least {-(-size // per_token)} tokens)"
    return None


def _text(content: Any) -> str | None:
    """A turn's content as its route joins it: a string, or a list of text parts; None for anything else
    (not counted)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence) or isinstance(content, bytes | bytearray):
        return None
    texts = []
    for part in content:
        text = part.get("text") if isinstance(part, Mapping) and part.get("type") in TEXT_PARTS else None
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)
