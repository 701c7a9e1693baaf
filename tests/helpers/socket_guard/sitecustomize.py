"""A socket guard for a server process under test: put this folder first on the process's PYTHONPATH and
name a log file in ``SIE_TEST_SOCKET_LOG``. Every attempt to reach an address that is not loopback (a
connect, a UDP send, a name lookup, an asyncio or uvloop connection) is refused with ENETUNREACH, as on a
machine with no network, and written to the log as one JSON line with the stack that made it, for the
test to read. Unix sockets and loopback pass. Python's own sockets only: a connection made in native code
without them is not seen here (tests/server/test_offline_guard.py also traces connect(2) where it can)."""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import threading
import traceback
from typing import Any

LOG = os.environ.get("SIE_TEST_SOCKET_LOG", "")
_lock = threading.Lock()
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def _local_host(host: Any) -> bool:
    if host is None:
        return True  # a passive lookup (binding), not a destination
    name = host.decode() if isinstance(host, bytes) else str(host)
    if name.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.split("%")[0]).is_loopback
    except ValueError:
        return False  # a name to resolve: a lookup that may leave the machine


def _local_address(family: int, address: Any) -> bool:
    if family not in (socket.AF_INET, socket.AF_INET6):
        return True  # unix sockets, netlink: they stay on the machine
    return _local_host(address[0] if isinstance(address, tuple) else address)


def _refuse(call: str, target: Any) -> None:
    entry = {"call": call, "target": repr(target), "pid": os.getpid(), "stack": traceback.format_stack(limit=12)}
    with _lock, open(LOG, "a") as log:
        log.write(json.dumps(entry) + "\n")
    raise OSError(errno.ENETUNREACH, f"socket guard: no outbound connection ({call} {target!r})")


def _install() -> None:
    sock = socket.socket
    connect, connect_ex, sendto = sock.connect, sock.connect_ex, sock.sendto

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if not _local_address(self.family, address):
            _refuse("connect", address)
        connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        if not _local_address(self.family, address):
            _refuse("connect_ex", address)
        return connect_ex(self, address)

    def guarded_sendto(self: socket.socket, data: Any, *args: Any) -> int:
        address = args[-1]
        if not _local_address(self.family, address):
            _refuse("sendto", address)
        return sendto(self, data, *args)  # type: ignore[arg-type]

    sock.connect = guarded_connect  # type: ignore[method-assign]
    sock.connect_ex = guarded_connect_ex  # type: ignore[method-assign]
    sock.sendto = guarded_sendto  # type: ignore[method-assign,assignment]
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex"):
        _guard_lookup(name)
    import asyncio.base_events

    _guard_loop(asyncio.base_events.BaseEventLoop)
    try:
        import uvloop
    except ImportError:
        return
    _guard_loop(uvloop.Loop)


def _guard_lookup(name: str) -> None:
    original = getattr(socket, name)

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _local_host(host):
            _refuse(name, host)
        return original(host, *args, **kwargs)

    setattr(socket, name, guarded)


def _guard_loop(cls: Any) -> None:
    original = cls.create_connection

    async def create_connection(self: Any, factory: Any, host: Any = None, *args: Any, **kwargs: Any) -> Any:
        if not _local_host(host):
            _refuse("create_connection", host)
        return await original(self, factory, host, *args, **kwargs)

    cls.create_connection = create_connection


if LOG:
    _install()
