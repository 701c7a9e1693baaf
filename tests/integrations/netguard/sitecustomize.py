"""Loaded at start-up by the fresh processes the integration tests run (via PYTHONPATH):
any socket connection to an address outside the loopback range raises, so a script that
tried to reach the network fails its test instead of sending traffic anywhere."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _check(sock: socket.socket, address: Any) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    host = address[0] if isinstance(address, tuple) else address
    if not ipaddress.ip_address(str(host).split("%")[0]).is_loopback:
        raise OSError(f"network access blocked in tests: {address!r}")


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _check(self, address)
    _connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _check(self, address)
    return _connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
