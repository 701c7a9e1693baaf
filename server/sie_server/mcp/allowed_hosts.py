"""Which ``Host`` and ``Origin`` headers ``/mcp`` answers: loopback, and what the operator adds.

A keyless server on 127.0.0.1 is reachable from any web page the user opens: a page on
``attacker.example`` whose name is re-pointed at 127.0.0.1 (DNS rebinding) sends its requests with
``Host: attacker.example`` and ``Origin: http://attacker.example``, and could drive every tool. The
MCP SDK's transport security refuses a Host outside the allow-list (421) and an Origin outside it
(403); a request without an Origin (every non-browser client) passes the Origin check. Patterns are
the SDK's: ``name``, ``name:port``, ``name:*`` for any port. ``*`` alone turns the check off, for a
server behind a proxy that checks these headers itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
ANY = "*"


@dataclass(frozen=True)
class AllowedHosts:
    hosts: tuple[str, ...]  # Host header patterns
    origins: tuple[str, ...]  # Origin header patterns
    enforced: bool


def allowed_hosts(extra: Sequence[str] = ()) -> AllowedHosts:
    """Loopback names on any port, plus ``extra`` (a name without a port also accepted on any port)."""
    if ANY in extra:
        return AllowedHosts((), (), enforced=False)
    names = [*LOOPBACK, *(name.strip().lower() for name in extra if name.strip())]
    hosts: list[str] = []
    for name in names:
        bare = name.endswith("]") or ":" not in name  # no port: "[::1]", "host"
        hosts.extend((name, f"{name}:*") if bare else (name,))
    origins = tuple(f"{scheme}://{host}" for host in hosts for scheme in ("http", "https"))
    return AllowedHosts(tuple(dict.fromkeys(hosts)), tuple(dict.fromkeys(origins)), enforced=True)
