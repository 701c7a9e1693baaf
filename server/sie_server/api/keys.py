"""Who may call what: API keys for work and model routes, admin keys for management routes.

A request sends ``Authorization: Bearer <key>``. Keys are compared in constant time, each
against every configured key. With API keys set, ``/v1/`` and ``/v2/`` routes, TEI's (and
``/metrics`` with ``metrics_need_key``) answer 401 without a key and 403 with a wrong one;
``/healthz``, ``/readyz``, ``/docs`` and ``/openapi.json`` stay open. With admin keys set,
management routes (``POST /v1/models/{id}/...``: reload) take an admin key only; an admin
key is also accepted wherever an API key is. Ollama's routes (``/api/...``) and MCP's ``/mcp`` are work
routes too.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from sie_server.contract.tei_wire import is_tei_path
from sie_server.errors import Forbidden, SIEError, Unauthenticated
from sie_server.settings import CommonSettings, read_key_file

WORK_PREFIXES = ("/v1/", "/v2/", "/api/")  # /api/: Ollama's routes (api/routes/ollama.py)
MANAGEMENT_PREFIX = "/v1/models/"
MCP_PATH = "/mcp"  # the MCP tools (sie_server/mcp): a work route


@dataclass(frozen=True)
class Verdict:
    """A request's answer from ``Access.check``: refused (``refusal``), or let in as ``caller``."""

    refusal: SIEError | None = None
    caller: str | None = None  # "key-0", "admin-1"; None when no key was needed


def _match(token: bytes, keys: tuple[bytes, ...]) -> int | None:
    """The index of ``token`` among ``keys``; every key is compared, in constant time each."""
    found = None
    for index, key in enumerate(keys):
        if hmac.compare_digest(token, key):
            found = index
    return found


def bearer(headers: Mapping[bytes, bytes]) -> bytes | None:
    header = headers.get(b"authorization")
    if header is None or header[:7].lower() != b"bearer ":
        return None
    return header[7:].strip()


def is_work(method: str, path: str) -> bool:
    """Work and model routes: ``/v1/``, ``/v2/``, and TEI's at the root (``contract/tei_wire.py``)."""
    return path.startswith(WORK_PREFIXES) or path == MCP_PATH or is_tei_path(method, path)


def is_management(method: str, path: str) -> bool:
    """Routes that change what the server holds (reload; evict and preload when they come)."""
    return method == "POST" and path.startswith(MANAGEMENT_PREFIX)


@dataclass(frozen=True)
class Access:
    keys: tuple[bytes, ...] = ()
    admin_keys: tuple[bytes, ...] = ()
    metrics_need_key: bool = False

    @classmethod
    def from_settings(cls, settings: CommonSettings) -> Access:
        from_file = read_key_file(settings.api_key_file) if settings.api_key_file else ()
        keys = dict.fromkeys([*settings.api_keys, *from_file])
        return cls(
            keys=tuple(k.encode() for k in keys),
            admin_keys=tuple(k.encode() for k in settings.admin_keys),
            metrics_need_key=settings.metrics_need_key,
        )

    @property
    def enabled(self) -> bool:
        return bool(self.keys or self.admin_keys)

    def needs_key(self, method: str, path: str) -> bool:
        return is_work(method, path) or (self.metrics_need_key and path == "/metrics")

    def check(self, method: str, path: str, headers: Mapping[bytes, bytes]) -> Verdict:
        token = bearer(headers)
        if self.admin_keys and is_management(method, path):
            if token is None:
                return Verdict(Unauthenticated("this is a management route: send Authorization: Bearer <admin key>"))
            admin = _match(token, self.admin_keys)
            if admin is None:
                return Verdict(Forbidden("this route needs an admin key"))
            return Verdict(caller=f"admin-{admin}")
        if not self.keys or not self.needs_key(method, path):
            return Verdict()
        if token is None:
            return Verdict(Unauthenticated("send Authorization: Bearer <API key>"))
        index = _match(token, self.keys)
        if index is not None:
            return Verdict(caller=f"key-{index}")
        admin = _match(token, self.admin_keys)
        if admin is not None:
            return Verdict(caller=f"admin-{admin}")
        return Verdict(Forbidden("this API key is not allowed"))
