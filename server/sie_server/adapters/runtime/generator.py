"""The contract between the decode loop (engine/decode_loop.py) and a model that generates text.

The loop owns the batch and the sampling; a generator only renders prompts, runs the model on
a batch (prefill, one-token decode steps), and turns tokens back into text. Two implementations:
transformers (``causal_lm``, a KV cache in torch tensors) and llama.cpp (``llamacpp``, one
context whose KV cache holds every sequence under its own id). A ``StreamingGenerator``
(SGLang) batches and decodes on its own: the engine only hands it prompts and reads its stream.
"""

from __future__ import annotations

import codecs
import collections.abc
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

import torch

from sie_server.adapters.runtime.base import ModelAdapter

#: a prefill in steps (``Generator.prefill_steps``): each ``next()`` reads one slice of the prompts; the
#: generator's return value (``StopIteration.value``) is what ``prefill`` answers
PrefillSteps = collections.abc.Generator[None, None, tuple[Any, torch.Tensor]]
T = TypeVar("T")


def run_steps(steps: collections.abc.Generator[None, None, T]) -> T:
    """Every step of a stepwise computation at once; what it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(T, done.value)


class Detokenizer(ABC):
    """Turns one sequence's generated tokens into text, a piece at a time, never re-decoding the whole."""

    @abstractmethod
    def add(self, token: int) -> str:
        """The new text this token completes (empty while a character is still incomplete)."""

    @abstractmethod
    def flush(self) -> str:
        """Whatever is held back, at the end of the sequence."""


class WindowDetokenizer(Detokenizer):
    """For tokenizers that only decode id lists (transformers): decode a short window of recent ids
    and emit what the newest ids add to it (the way TGI and vLLM stream), so a step costs the same
    however long the answer already is."""

    def __init__(self, decode: Callable[[list[int]], str]):
        self._decode = decode
        self._ids: list[int] = []
        self._prefix = 0  # start of the window that is decoded again for context
        self._read = 0  # ids before this have been emitted

    def add(self, token: int) -> str:
        self._ids.append(token)
        return self._advance(final=False)

    def flush(self) -> str:
        return self._advance(final=True)

    def _advance(self, *, final: bool) -> str:
        before = self._decode(self._ids[self._prefix : self._read])
        now = self._decode(self._ids[self._prefix :])
        if len(now) <= len(before) or (now.endswith("\ufffd") and not final):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        return now[len(before) :]


class ByteDetokenizer(Detokenizer):
    """For tokenizers that give each token's bytes (llama.cpp): UTF-8 decoded incrementally."""

    def __init__(self, piece: Callable[[int], bytes]):
        self._piece = piece
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, token: int) -> str:
        return str(self._utf8.decode(self._piece(token)))

    def flush(self) -> str:
        return str(self._utf8.decode(b"", final=True))


class Generator(ModelAdapter):
    """What the decode loop needs from a loaded causal LM. ``Batch`` is the implementation's own
    handle on the running rows (a KV cache and mask, or a list of sequence ids)."""

    #: token ids that end a sequence
    eos_ids: frozenset[int] = frozenset()
    #: tokens one sequence may hold (prompt + generated)
    context_length: int = 0
    #: sequences one batch may hold (None: only the token budget limits it)
    max_rows: int | None = None
    #: an upper bound on the UTF-8 bytes of prompt text one token stands for (0: unknown), and the roles
    #: whose turns the chat template renders; set at load (runtime/token_bytes.py) so a prompt that cannot
    #: fit the context is refused before it is rendered or tokenized (engine/prompt_bounds.py)
    max_token_bytes: int = 0
    rendered_roles: frozenset[str] = frozenset()

    @abstractmethod
    def prompt_ids(
        self, prompt: str | None, messages: list[dict[str, Any]] | None, template_args: Mapping[str, Any] | None = None
    ) -> list[int]:
        """A raw prompt, or chat messages rendered with the model's chat template, as token ids;
        ``template_args`` are the template's other variables (``tools=``, sie_server/tool_formats)."""

    def chat_template_text(self) -> str | None:
        """The chat template's Jinja source (None: the model has none), for telling its tool format."""
        return None

    @abstractmethod
    def detokenizer(self) -> Detokenizer:
        """A fresh detokenizer for one sequence."""

    @abstractmethod
    def prefill(self, prompts: list[list[int]]) -> tuple[Any, torch.Tensor]:
        """Run the prompts together; the new batch and each row's next-token logits (rows x vocab)."""

    def prefill_steps(self, prompts: list[list[int]], step_tokens: int) -> PrefillSteps:
        """``prefill`` in steps of about ``step_tokens`` prompt tokens each, so the decode loop can run the
        running sequences' decode steps in between (a long prompt does not stall them). Closing the
        generator before it returns frees what it holds. By default the whole prefill is one step."""
        yield from ()
        return self.prefill(prompts)

    @abstractmethod
    def decode(self, batch: Any, tokens: list[int], positions: list[int]) -> torch.Tensor:
        """One step: each row's last token at its position in; next-token logits out."""

    @abstractmethod
    def merge(self, first: Any | None, second: Any) -> Any:
        """One batch holding the rows of both (``first`` rows first)."""

    @abstractmethod
    def keep(self, batch: Any, rows: list[int]) -> Any | None:
        """The batch with only ``rows`` (in that order), freeing the others; None when none is left."""

    def discard(self, batch: Any) -> None:
        """Free every row of a batch that is abandoned (the loop failed or stopped)."""

    def grammar_tokenizer(self) -> Any:
        """The vocabulary as the grammar engine (llguidance) sees it, built once per load: an
        ``LLTokenizer`` whose size is the width of the logits ``prefill`` and ``decode`` answer.
        None: this model cannot constrain its output."""
        return None


class Sampling(Protocol):
    """How one sequence is sampled (the engine's ``SamplingParams``)."""

    @property
    def max_new_tokens(self) -> int: ...

    @property
    def temperature(self) -> float: ...

    @property
    def top_p(self) -> float: ...

    @property
    def stop(self) -> Sequence[str]: ...

    @property
    def seed(self) -> int | None: ...

    @property
    def frequency_penalty(self) -> float: ...

    @property
    def presence_penalty(self) -> float: ...


class StreamingGenerator(Generator):
    """A generator whose runtime batches and decodes by itself; the engine's decode loop is not used."""

    @abstractmethod
    def stream(self, prompt_ids: list[int], params: Sampling) -> AsyncIterator[tuple[str, str | None, int]]:
        """(text delta, finish reason once finished, completion tokens so far) as the runtime produces them."""
