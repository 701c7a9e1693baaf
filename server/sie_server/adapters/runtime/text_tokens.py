"""What a model with a text tokenizer offers besides its work: a text's tokens with where each lies in
the text, and ids back to text (``POST /v1/tokenize`` and ``/v1/detokenize``, TEI's ``/tokenize`` and
``/decode``).

``hf_spans`` and ``hf_texts`` serve every adapter over a ``tokenizers.Tokenizer`` (the transformers
encoders, scorers and classifiers, and the causal LMs' fast tokenizer); the llama.cpp adapter uses
llama.cpp's own tokenizer (``adapters/generators/llamacpp_tokens.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tokenizers import Tokenizer

from sie_server.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class TokenSpan:
    """One token of a text. A token the tokenizer added (``special``: ``[CLS]``, a BOS) has its own
    string as ``text`` and no offsets; any other has the text's characters ``start`` to ``stop``
    (character offsets into the text) as ``text``."""

    id: int
    text: str
    special: bool
    start: int | None
    stop: int | None


@runtime_checkable
class TextTokenizer(Protocol):
    """A loaded model whose text tokenizer is exposed. Neither call truncates to the model's limit."""

    def token_spans(self, texts: list[str], *, add_special_tokens: bool) -> list[list[TokenSpan]]:
        """Each text's tokens, in order (one list per text)."""
        ...

    def vocabulary_size(self) -> int:
        """Ids ``0 .. vocabulary_size() - 1`` are tokens (added tokens included). (A method, not a property:
        ``isinstance`` against this protocol would evaluate a property.)"""
        ...

    def detokenize(self, ids: list[list[int]], *, skip_special_tokens: bool) -> list[str]:
        """Each id list as text (its ids checked against ``vocabulary_size()`` first: ``check_ids``)."""
        ...


def whole(tokenizer: Tokenizer) -> Tokenizer:
    """A copy of ``tokenizer`` that neither pads nor truncates."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_padding()
    copy.no_truncation()
    return copy


def hf_spans(tokenizer: Tokenizer, texts: list[str], *, add_special_tokens: bool) -> list[list[TokenSpan]]:
    """Token spans from a ``tokenizers.Tokenizer`` (one that neither pads nor truncates: ``whole``).
    ``special`` is its special-tokens mask: the tokens its post-processor added."""
    out = []
    for text, e in zip(texts, tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens), strict=True):
        spans = []
        for token_id, token, (start, stop), special in zip(
            e.ids, e.tokens, e.offsets, e.special_tokens_mask, strict=True
        ):
            if special:
                spans.append(TokenSpan(int(token_id), token, True, None, None))
            else:
                spans.append(TokenSpan(int(token_id), text[start:stop], False, int(start), int(stop)))
        out.append(spans)
    return out


def check_ids(ids: list[list[int]], vocabulary: int) -> None:
    """INVALID_INPUT naming the first id outside the vocabulary (a tokenizer would skip it silently)."""
    for k, row in enumerate(ids):
        if not row or (min(row) >= 0 and max(row) < vocabulary):  # (min and max run at C speed)
            continue
        bad = next(i for i in row if not 0 <= i < vocabulary)
        raise InvalidInput(f"items[{k}].ids holds {bad}, outside the model's vocabulary of {vocabulary} tokens")


def hf_texts(tokenizer: Tokenizer, ids: list[list[int]], *, skip_special_tokens: bool) -> list[str]:
    return list(tokenizer.decode_batch(ids, skip_special_tokens=skip_special_tokens))
