"""What every generative guard format gives: the chat messages its model's own moderation template takes, and
a parser that turns the model's generated text into a verdict, or refuses it.

A guard's moderation prompt is its chat template's work (Qwen3Guard-Gen, Llama Guard 3 and granite-guardian
ship theirs in tokenizer_config.json and in their GGUF metadata): a format only says how the item's prompt
and optional response become chat messages. A verdict that cannot be read is ``InvalidOutput``, never a guess.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sie_server.errors import InvalidOutput

Label = Literal["safe", "unsafe", "controversial"]
#: characters of the raw text an InvalidOutput message quotes
QUOTED = 300


@dataclass(frozen=True)
class Verdict:
    """A guard's reading of one item: the verdict, the categories it named (in the model's own words) and what
    else the format says (``refusal`` for Qwen3Guard's response moderation, ``confidence`` for granite)."""

    label: Label
    categories: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def classifications(self) -> list[dict[str, Any]]:
        """The verdict first, then each category; score 1.0: the verdict is the text the model generated
        greedily, not a probability."""
        return [{"label": self.label, "score": 1.0}, *({"label": c, "score": 1.0} for c in self.categories)]


class GuardFormat(ABC):
    """One guard family's messages and verdict parser (registered by name in ``sie_server.adapters.guards``)."""

    name: str
    #: tokens a verdict takes at most (a config's ``tasks.extract.options.max_new_tokens`` replaces it)
    max_new_tokens: int = 32

    def messages(self, prompt: str, response: str | None, options: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The conversation to judge: the user's prompt, and the assistant's response when there is one (the
        template then moderates the response). Plain string contents unless a format needs otherwise."""
        turns: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        if response is not None:
            turns.append({"role": "assistant", "content": response})
        return turns

    @abstractmethod
    def parse(self, raw: str) -> Verdict:
        """The verdict in the model's text; ``InvalidOutput`` (see ``unreadable``) when it is not one."""

    def unreadable(self, raw: str, why: str) -> InvalidOutput:
        quoted = raw if len(raw) <= QUOTED else raw[:QUOTED] + "..."
        return InvalidOutput(f"the model's output is not a {self.name} verdict ({why}): {quoted!r}")
