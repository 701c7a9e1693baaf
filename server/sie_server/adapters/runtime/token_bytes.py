"""What the engine's prompt bounds (``engine/prompt_bounds.py``) know of a generator, measured once at load:

- ``max_token_bytes``: an upper bound on the UTF-8 bytes of input text one token can stand for. A
  tokenizer that covers every byte of its input (byte-level BPE, or byte fallback) and never drops or
  shrinks text gives a text of ``b`` bytes at least ``b / max_token_bytes`` tokens. Tokenizers that may
  drop input (whitespace-splitting pre-tokenizers, added tokens that strip the spaces around them, an
  ``<unk>`` that swallows a run of unknown characters) give 0: unknown, no byte bound.
- ``rendered_roles``: the roles whose turns the chat template renders with their content, found by
  rendering a probe chat (guard templates, for one, render only the last turns: none is counted).
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Callable, Iterable
from typing import Any

Render = Callable[[list[dict[str, Any]]], str]

CORE_ROLES = ("user", "assistant")
EXTRA_ROLES = ("system", "developer", "tool")
_PROBE = [
    {"role": "user", "content": "sie-probe-first"},
    {"role": "assistant", "content": "sie-probe-second"},
    {"role": "user", "content": "sie-probe-third"},
]
# pre-tokenizers that drop whitespace: the text they leave may be far shorter than the input
_DROPPING = frozenset({"Whitespace", "WhitespaceSplit", "BertPreTokenizer", "CharDelimiterSplit"})
# normalizers that map each character to at least a quarter of its UTF-8 bytes (a 4-byte
# mathematical letter can become one ASCII byte under NFKC); any other normalizer: unknown
_SHRINKING = frozenset({"NFC", "NFD", "NFKC", "NFKD", "Lowercase"})
_NORMALIZERS = _SHRINKING | {"Sequence", "Prepend", "Replace"}
SHRINK_FACTOR = 4


def rendered_roles(render: Render) -> frozenset[str]:
    """The roles whose turns ``render`` shows, each with its content, in order and apart from the others'
    (nothing when the template drops or merges a turn of the plain user/assistant/user probe)."""
    if not _shows(render, _PROBE):
        return frozenset()
    extra = [role for role in EXTRA_ROLES if _shows(render, [{"role": role, "content": "sie-probe-zero"}, *_PROBE])]
    return frozenset([*CORE_ROLES, *extra])


def _shows(render: Render, messages: list[dict[str, str]]) -> bool:
    try:
        text = render(messages)
    except Exception:  # a template that refuses this chat (roles, order): those roles are not counted
        return False
    at = 0
    for message in messages:
        found = text.find(message["content"], at)
        if found < 0 or (at and found == at):  # dropped, or glued to the previous turn's content
            return False
        at = found + len(message["content"])
    return True


def fallback_chat(messages: list[dict[str, Any]]) -> str:
    """A chat as text for a model with no chat template (both backends render it this way)."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\nassistant:"


def hf_max_token_bytes(tokenizer: Any) -> int:
    """For a transformers tokenizer: the longest vocabulary string in UTF-8 (an overestimate for
    byte-level BPE, whose strings spell each byte as one character of up to 2 bytes), times 4 where a
    normalizer may shrink the text; 0 where the tokenizer may drop input or is not a fast one."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return 0
    decoder, pre, normalizer = (_state(c) for c in (backend.decoder, backend.pre_tokenizer, backend.normalizer))
    byte_level = "ByteLevel" in _types(decoder) | _types(pre)
    if not (byte_level or getattr(backend.model, "byte_fallback", False)):
        return 0  # an <unk> may stand for any run of characters
    if _types(pre) & _DROPPING or '"Removed"' in json.dumps(pre):
        return 0
    factor = _normalizer_factor(normalizer)
    if not factor:
        return 0
    added = getattr(tokenizer, "added_tokens_decoder", {}).values()
    if any(getattr(t, "lstrip", False) or getattr(t, "rstrip", False) for t in added):
        return 0  # such a token also stands for the spaces beside it, however many
    vocab: Iterable[str] = tokenizer.get_vocab()
    return max((len(token.encode("utf-8")) for token in vocab), default=0) * factor


def _normalizer_factor(normalizer: Any) -> int:
    """How many times shorter the normalized text may be (0: unbounded or unknown)."""
    if normalizer is None:
        return 1
    types = _types(normalizer)
    if not types <= _NORMALIZERS:
        return 0
    for node in _nodes(normalizer):
        if node.get("type") == "Replace":
            pattern = node.get("pattern", {})
            if "String" not in pattern or len(str(node.get("content", ""))) < len(str(pattern["String"])):
                return 0  # a regex, or a replacement shorter than what it replaces
    return SHRINK_FACTOR if types & _SHRINKING else 1


def _state(component: Any) -> Any:
    """A tokenizers component (decoder, pre-tokenizer, normalizer) as its JSON, None if absent."""
    if component is None:
        return None
    return json.loads(component.__getstate__())


def _nodes(state: Any) -> Iterable[dict[str, Any]]:
    if isinstance(state, dict):
        yield state
        for value in state.values():
            yield from _nodes(value)
    elif isinstance(state, list):
        for value in state:
            yield from _nodes(value)


def _types(state: Any) -> set[str]:
    return {str(node["type"]) for node in _nodes(state) if "type" in node}


def gguf_max_token_bytes(vocab: Any, n_vocab: int) -> int:
    """For a llama.cpp vocabulary: the longest token piece (special tokens' text included, as prompts
    parse them), for the byte-covering vocabularies (SentencePiece with byte fallback, byte-level BPE)
    without tokens that strip the spaces beside them; 0 otherwise."""
    import llama_cpp as llama

    if int(llama.llama_vocab_type(vocab)) not in (llama.LLAMA_VOCAB_TYPE_SPM, llama.LLAMA_VOCAB_TYPE_BPE):
        return 0
    strips = llama.LLAMA_TOKEN_ATTR_LSTRIP | llama.LLAMA_TOKEN_ATTR_RSTRIP
    buffer, longest = ctypes.create_string_buffer(8), 0
    for token in range(n_vocab):
        if int(llama.llama_vocab_get_attr(vocab, token)) & strips:
            return 0
        # too small for most pieces on purpose: the answer is then minus the piece's length
        longest = max(longest, abs(int(llama.llama_token_to_piece(vocab, token, buffer, 8, 0, True))))
    return longest
