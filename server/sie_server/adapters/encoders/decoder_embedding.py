"""Decoder-based embedders (Qwen3-Embedding, gte-Qwen2, e5-mistral and its fine-tunes).

The embedding is the hidden state of the last token of each text: the EOS the model was trained to
summarise into (``runtime.append_token``), appended here when the tokenizer does not add it itself.
Queries carry an instruction (``runtime.instruction_template``, with ``runtime.default_instruction``
when the request gives none); documents carry none. Batches are right-padded and pooled at each
row's last real token, so a text's vector does not depend on what it is batched with (left padding
would shift the positions of the shorter rows).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sie_server.adapters.encoders.embedding import EmbeddingAdapter
from sie_server.adapters.runtime.base import Tokens
from sie_server.errors import ModelLoadFailed


class DecoderEmbeddingAdapter(EmbeddingAdapter):
    _append_id: int | None = None

    def load(self, weights: Path) -> None:
        super().load(weights)
        token = self.config.runtime.append_token
        if token is None:
            return
        found = self.tokenizer.token_to_id(token)
        if found is None:
            self.unload()
            raise ModelLoadFailed(f"model {self.config.id}: runtime.append_token {token!r} is not in its tokenizer")
        self._append_id = int(found)

    def format_text(self, text: str, *, is_query: bool, instruction: str | None) -> str:
        """A query in the instruction template (the request's instruction, else the model's default);
        a document as it is (after ``doc_prefix``) unless the request names an instruction."""
        runtime = self.config.runtime
        chosen = instruction or (runtime.default_instruction if is_query else None)
        if chosen:
            return runtime.instruction_template.format(instruction=chosen, text=text)
        return (runtime.query_prefix if is_query else runtime.doc_prefix) + text

    def tokenize_texts(self, texts: list[str]) -> list[Tokens]:
        tokens = super().tokenize_texts(texts)
        eos = self._append_id
        if eos is None:
            return tokens
        return [self._ended(t, eos) for t in tokens]

    def long_tokens(self, texts: list[str], *, is_query: bool, instruction: str | None) -> list[Tokens]:
        """Untruncated texts (``truncation`` error / chunk) end with the EOS too, as a trailing token that
        every chunk window keeps."""
        tokens = super().long_tokens(texts, is_query=is_query, instruction=instruction)
        eos = self._append_id
        if eos is None:
            return tokens
        ended = []
        for t in tokens:
            if t.input_ids and t.input_ids[-1] == eos:
                ended.append(t)
                continue
            layout = replace(t.data, trail=t.data.trail + 1, starts=[*t.data.starts, -1])
            ended.append(replace(t, input_ids=[*t.input_ids, eos], data=layout))
        return ended

    def _ended(self, tokens: Tokens, eos: int) -> Tokens:
        """``tokens`` ending with ``eos``: appended, cutting the text's last token when at the length limit."""
        ids = tokens.input_ids
        if ids and ids[-1] == eos:
            return tokens
        cut = len(ids) >= self.max_length
        kept = ids[: self.max_length - 1] if cut else ids
        return Tokens(input_ids=[*kept, eos], token_type_ids=None, truncated=tokens.truncated or cut, data=tokens.data)
