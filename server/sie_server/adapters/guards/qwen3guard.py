"""Qwen3Guard-Gen (Qwen/Qwen3Guard-Gen-0.6B, -4B, -8B): "Safety: Safe|Unsafe|Controversial", a "Categories:" line
(the model's category names, or None), and for response moderation "Refusal: Yes|No".

Its chat template writes the whole moderation prompt from plain messages: a last user turn is prompt
moderation, a last assistant turn is response moderation (the template then adds the refusal question).
"""

from __future__ import annotations

import re

from sie_server.adapters.guards.base import GuardFormat, Label, Verdict

#: the categories of the model card (prompt moderation; response moderation has all but Jailbreak)
CATEGORIES = (
    "Violent",
    "Non-violent Illegal Acts",
    "Sexual Content or Sexual Acts",
    "PII",
    "Suicide & Self-Harm",
    "Unethical Acts",
    "Politically Sensitive Topics",
    "Copyright Violation",
    "Jailbreak",
)
_BY_LOWER = {c.lower(): c for c in CATEGORIES}
_SAFETY = re.compile(r"^safety:\s*(safe|unsafe|controversial)\s*$", re.IGNORECASE)
_CATEGORIES = re.compile(r"^categories:\s*(.*)$", re.IGNORECASE)
_REFUSAL = re.compile(r"^refusal:\s*(yes|no)\s*$", re.IGNORECASE)
_THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)


class Qwen3Guard(GuardFormat):
    name = "qwen3guard"
    max_new_tokens = 64  # all nine categories fit in about 40 tokens

    def parse(self, raw: str) -> Verdict:
        lines = [line.strip() for line in _THINK.sub("", raw).strip().splitlines() if line.strip()]
        safety = _SAFETY.match(lines[0]) if lines else None
        if safety is None:
            raise self.unreadable(raw, "no 'Safety: Safe|Unsafe|Controversial' first line")
        label: Label = safety.group(1).lower()  # type: ignore[assignment]
        categories: tuple[str, ...] = ()
        extra: dict[str, object] = {}
        for line in lines[1:]:
            if found := _CATEGORIES.match(line):
                categories = self._categories(raw, found.group(1))
            elif found := _REFUSAL.match(line):
                extra["refusal"] = found.group(1).lower() == "yes"
            else:
                raise self.unreadable(raw, f"unexpected line {line!r}")
        if label != "safe" and not categories:
            raise self.unreadable(raw, f"a {label} verdict names no category")
        return Verdict(label, categories, extra)

    def _categories(self, raw: str, listed: str) -> tuple[str, ...]:
        names = [name.strip().rstrip(".") for name in listed.split(",") if name.strip()]
        if [n.lower() for n in names] == ["none"]:
            return ()
        unknown = [n for n in names if n.lower() not in _BY_LOWER]
        if unknown or not names:
            raise self.unreadable(raw, f"unknown categories {unknown}" if unknown else "an empty Categories line")
        return tuple(dict.fromkeys(_BY_LOWER[n.lower()] for n in names))
