"""LLM rerankers (Qwen3-Reranker, bge-reranker-v2-gemma): relevance from the next-token logits of a prompt.

Each (query, document) pair becomes one prompt from ``runtime.prompt_template``; the causal LM runs
once over a right-padded batch, and only the last real token's hidden state of each row goes
through the output head, for the yes (and no) token alone. The score is P(yes) = softmax over the
[no, yes] logits when ``runtime.no_token`` is set (Qwen3-Reranker), else the yes logit through
``runtime.activation`` (bge-reranker-v2-gemma). A prompt over the length limit loses the end of its
document first, then of its query; the template's tail (the assistant prefix) is always kept.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import PairScorer
from sie_server.adapters.runtime.options import ScoreOptions
from sie_server.adapters.runtime.transformers_base import TransformersAdapter
from sie_server.errors import ModelLoadFailed

Span = tuple[int, int]


def render(template: str, values: dict[str, str]) -> tuple[str, dict[str, Span]]:
    """``template`` with its ``{name}`` fields filled in, and each field's character span in the result."""
    parts: list[str] = []
    spans: dict[str, Span] = {}
    at = 0
    for literal, field, _, _ in string.Formatter().parse(template):
        parts.append(literal)
        at += len(literal)
        if field is not None:
            value = values[field]
            spans[field] = (at, at + len(value))
            parts.append(value)
            at += len(value)
    return "".join(parts), spans


class LlmRerankerAdapter(TransformersAdapter, PairScorer):
    #: vocabulary ids whose logits are read: [no, yes] or [yes]
    _ids: tuple[int, ...] = ()

    def _model_class(self) -> Any:
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM

    def load(self, weights: Path) -> None:
        super().load(weights)
        runtime = self.config.runtime
        words = [runtime.no_token, runtime.yes_token] if runtime.no_token is not None else [runtime.yes_token]
        ids = []
        for word in words:
            found = self.tokenizer.encode(word, add_special_tokens=False).ids
            if len(found) != 1:
                self.unload()
                raise ModelLoadFailed(
                    f"model {self.config.id}: {word!r} is {len(found)} tokens in its tokenizer, not one; "
                    "runtime.yes_token / no_token must each be a single token"
                )
            ids.append(found[0])
        self._ids = tuple(ids)

    def prompt(self, query: str, document: str, instruction: str | None = None) -> tuple[str, dict[str, Span]]:
        """The prompt for one pair, and where the query and the document are in it."""
        chosen = instruction or self.config.runtime.default_instruction or ""
        return render(
            self.config.runtime.prompt_template, {"instruction": chosen, "query": query, "document": document}
        )

    def tokenize_pairs(self, query: str, documents: list[str], instruction: str | None = None) -> list[Tokens]:
        if self._whole_tokenizer is None:
            raise RuntimeError("adapter used before load()")
        prompts = [self.prompt(query, d, instruction) for d in documents]
        encodings = self._whole_tokenizer.encode_batch([text for text, _ in prompts], add_special_tokens=False)
        return [self._fit(e.ids, e.offsets, spans) for e, (_, spans) in zip(encodings, prompts, strict=True)]

    def _fit(self, ids: list[int], offsets: list[Span], spans: dict[str, Span]) -> Tokens:
        """At most ``max_length`` tokens: the document's last tokens dropped first, then the query's."""
        over = len(ids) - self.max_length
        if over <= 0:
            return Tokens(input_ids=list(ids), token_type_ids=None, truncated=False)
        dropped: set[int] = set()
        for field in ("document", "query"):
            if over <= 0 or field not in spans:
                continue
            start, end = spans[field]
            inside = [k for k, (s, e) in enumerate(offsets) if e > s and s >= start and e <= end]
            cut = inside[max(len(inside) - over, 0) :]
            dropped.update(cut)
            over -= len(cut)
        kept = [token for k, token in enumerate(ids) if k not in dropped]
        return Tokens(input_ids=kept[-self.max_length :], token_type_ids=None, truncated=True)

    def run(self, batch: list[Tokens], options: ScoreOptions) -> list[float]:
        inputs = self.pad(batch)
        mask = inputs["attention_mask"]
        with torch.inference_mode():
            hidden = self.model.get_decoder()(**inputs).last_hidden_state
            last = hidden[torch.arange(hidden.shape[0], device=hidden.device), mask.sum(dim=1) - 1]
            head = self.model.get_output_embeddings()
            rows = torch.tensor(self._ids, device=hidden.device)
            logits = last.float() @ head.weight[rows].float().T  # two rows of the head, in float32
            if getattr(head, "bias", None) is not None:
                logits = logits + head.bias[rows].float()
            cap = getattr(self.model.config, "final_logit_softcapping", None)
            if cap:
                logits = torch.tanh(logits / cap) * cap
        if self.config.runtime.no_token is not None:
            scores = torch.log_softmax(logits, dim=-1)[:, 1].exp()
        else:
            scores = logits[:, 0]
            if self.config.runtime.activation == "sigmoid":
                scores = torch.sigmoid(scores)
        return [float(s) for s in scores.cpu()]
