"""IBM granite-guardian (3.1, 3.2, 3.3): whether the conversation carries the risk its template asks about.

3.1 answers "Yes" or "No"; 3.2 adds "<confidence> High|Low </confidence>"; 3.3 answers "<score> yes|no </score>",
after a "<think>...</think>" block when thinking is on. Without a ``guardian_config`` the chat templates ask
about the general ``harm`` risk (of the user's prompt, or of the assistant's response when there is one), so a
"yes" is an unsafe verdict in the category ``harm``.
"""

from __future__ import annotations

import re

from sie_server.adapters.guards.base import GuardFormat, Verdict

DEFAULT_RISK = "harm"
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_SCORE = re.compile(r"^<score>\s*(yes|no)\s*</score>$", re.IGNORECASE)
_PLAIN = re.compile(r"^(yes|no)\b\s*(.*)$", re.IGNORECASE | re.DOTALL)
_CONFIDENCE = re.compile(r"^<confidence>\s*(high|low)\s*</confidence>$", re.IGNORECASE)


class GraniteGuardian(GuardFormat):
    name = "granite_guardian"
    max_new_tokens = 20

    def parse(self, raw: str) -> Verdict:
        text = _THINK.sub("", raw).strip()
        extra: dict[str, object] = {"risk": DEFAULT_RISK}
        if found := _SCORE.match(text):
            answer = found.group(1)
        elif found := _PLAIN.match(text):
            answer, rest = found.group(1), found.group(2).strip()
            if rest:
                confidence = _CONFIDENCE.match(rest)
                if confidence is None:
                    raise self.unreadable(raw, f"unexpected text after {answer!r}")
                extra["confidence"] = confidence.group(1).capitalize()
        else:
            raise self.unreadable(raw, "neither Yes/No nor '<score> yes|no </score>'")
        if answer.lower() == "yes":
            return Verdict("unsafe", (DEFAULT_RISK,), extra)
        return Verdict("safe", (), extra)
