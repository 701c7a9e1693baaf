"""llama.cpp's own tokenizer as the text tokenizer a model exposes (``runtime/text_tokens.py``): token
spans placed on the text from each token's piece (its bytes, as llama.cpp renders it), and ids back to
text through ``llama_detokenize``.

The callers hold ``VOCAB_LOCK`` around these calls and around freeing the model, so a tokenization on
the tokenizer thread never reads a vocabulary an eviction has just freed.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from sie_server.adapters.runtime.text_tokens import TokenSpan

VOCAB_LOCK = threading.Lock()


def tokenize(vocab: Any, text: str, *, add_special: bool) -> list[int]:
    """``text`` as llama.cpp's token ids (special tokens in the text parsed as such)."""
    import llama_cpp as llama

    data = text.encode()
    room = len(data) + 8
    buffer = (llama.llama_token * room)()
    count = llama.llama_tokenize(vocab, data, len(data), buffer, room, add_special, True)
    if count < 0:  # too small: -count is what it needs
        room = -count
        buffer = (llama.llama_token * room)()
        count = llama.llama_tokenize(vocab, data, len(data), buffer, room, add_special, True)
    return [int(t) for t in buffer[:count]]


def piece(vocab: Any, token: int, *, special: bool = False) -> bytes:
    """The bytes one token stands for (a special token's own text with ``special``)."""
    import llama_cpp as llama

    buffer = ctypes.create_string_buffer(64)
    size = llama.llama_token_to_piece(vocab, token, buffer, 64, 0, special)
    if size < 0:
        buffer = ctypes.create_string_buffer(-size)
        size = llama.llama_token_to_piece(vocab, token, buffer, -size, 0, special)
    return bytes(buffer.raw[:size])


def char_index(data: bytes) -> np.ndarray:
    """For each byte offset into UTF-8 ``data`` (and its end), the index of the character it falls in."""
    raw = np.frombuffer(data, dtype=np.uint8)
    first = (raw & 0xC0) != 0x80  # a character's first byte
    index = np.cumsum(first) - 1
    return np.append(index, int(first.sum())).astype(np.int64)


def spans(
    text: str, ids: list[int], piece: Callable[[int], bytes], is_control: Callable[[int], bool]
) -> list[TokenSpan]:
    """``ids`` (``text`` tokenized) with their place in ``text``: a token whose piece is the text's next
    bytes covers them; a control token that is not (a BOS or EOS llama.cpp added) is special; any other
    piece covers as many bytes as it has (less SentencePiece's leading space where the text has none)."""
    data = text.encode()
    chars = char_index(data)
    out: list[TokenSpan] = []
    pos = 0
    for token in ids:
        bytes_ = piece(token)
        if bytes_ and data.startswith(bytes_, pos):
            start, stop = pos, pos + len(bytes_)
        elif is_control(token):
            out.append(TokenSpan(token, bytes_.decode("utf-8", errors="replace"), True, None, None))
            continue
        else:
            lead = 1 if bytes_.startswith(b" ") and not data.startswith(b" ", pos) else 0
            start, stop = pos, min(len(data), pos + len(bytes_) - lead)
        pos = stop
        first = int(chars[start])
        last = int(chars[stop - 1]) + 1 if stop > start else first
        out.append(TokenSpan(token, text[first:last], False, first, last))
    return out


def detokenize(llama: Any, vocab: Any, ids: list[int], *, skip_special_tokens: bool) -> str:
    """``ids`` as text: with ``skip_special_tokens`` the BOS / EOS dropped and control tokens not rendered."""
    tokens = (llama.llama_token * max(1, len(ids)))(*ids)
    room = max(64, 8 * len(ids))
    for _ in range(2):
        buffer = ctypes.create_string_buffer(room)
        size = int(llama.llama_detokenize(vocab, tokens, len(ids), buffer, room, skip_special_tokens,
                                          not skip_special_tokens))  # fmt: skip
        if size >= 0:
            return buffer.raw[:size].decode("utf-8", errors="replace")
        room = -size  # too small: -size is what it needs
    raise RuntimeError("llama_detokenize wanted a larger buffer twice")
