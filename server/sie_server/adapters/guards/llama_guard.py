"""Llama Guard 3 (meta-llama/Llama-Guard-3-1B, -8B): "safe", or "unsafe" and a line of hazard codes ("S1,S10"),
answered here with the names of the MLCommons taxonomy the model card lists ("S1: Violent Crimes").

Llama-Guard-3-1B's chat template reads each message's content as a list of parts
(``[{"type": "text", "text": ...}]``); Llama-Guard-3-8B's takes plain strings: a config sets
``tasks.extract.options.content_parts: false`` for those.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sie_server.adapters.guards.base import GuardFormat, Verdict

HAZARDS = {
    "S1": "Violent Crimes",
    "S2": "Non-Violent Crimes",
    "S3": "Sex-Related Crimes",
    "S4": "Child Sexual Exploitation",
    "S5": "Defamation",
    "S6": "Specialized Advice",
    "S7": "Privacy",
    "S8": "Intellectual Property",
    "S9": "Indiscriminate Weapons",
    "S10": "Hate",
    "S11": "Suicide & Self-Harm",
    "S12": "Sexual Content",
    "S13": "Elections",
    "S14": "Code Interpreter Abuse",  # Llama-Guard-3-8B only
}
_CODE = re.compile(r"^S\d{1,2}$")


class LlamaGuard(GuardFormat):
    name = "llama_guard"
    max_new_tokens = 24

    def messages(self, prompt: str, response: str | None, options: Mapping[str, Any]) -> list[dict[str, Any]]:
        turns = super().messages(prompt, response, options)
        if not options.get("content_parts", True):
            return turns
        return [{"role": t["role"], "content": [{"type": "text", "text": t["content"]}]} for t in turns]

    def parse(self, raw: str) -> Verdict:
        lines = [line.strip() for line in raw.strip().splitlines() if line.strip()]
        if lines == ["safe"]:
            return Verdict("safe")
        if not lines or lines[0] != "unsafe":
            raise self.unreadable(raw, "neither 'safe' nor 'unsafe'")
        if len(lines) != 2:
            raise self.unreadable(raw, "an unsafe verdict has one line of hazard codes after it")
        codes = [code.strip().upper() for code in lines[1].split(",")]
        unknown = [c for c in codes if not _CODE.match(c) or c not in HAZARDS]
        if unknown:
            raise self.unreadable(raw, f"unknown hazard codes {unknown}")
        return Verdict("unsafe", tuple(dict.fromkeys(f"{c}: {HAZARDS[c]}" for c in codes)))
