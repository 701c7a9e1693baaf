"""Generative guards: the verdict formats a causal LM's ``tasks.extract.guard`` may name, one module each."""

from __future__ import annotations

from sie_server.adapters.guards.base import GuardFormat, Verdict
from sie_server.adapters.guards.granite_guardian import GraniteGuardian
from sie_server.adapters.guards.llama_guard import LlamaGuard
from sie_server.adapters.guards.qwen3guard import Qwen3Guard

GUARDS: dict[str, GuardFormat] = {g.name: g for g in (Qwen3Guard(), LlamaGuard(), GraniteGuardian())}


def guard_format(name: str) -> GuardFormat:
    """The format a config names (the schema allows only these names)."""
    return GUARDS[name]


__all__ = ["GUARDS", "GuardFormat", "Verdict", "guard_format"]
