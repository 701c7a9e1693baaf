"""The Host and Origin patterns /mcp accepts (sie_server/mcp/allowed_hosts.py)."""

from __future__ import annotations

from sie_server.mcp.allowed_hosts import allowed_hosts


def test_loopback_on_any_port_by_default() -> None:
    allowed = allowed_hosts()
    assert allowed.enforced
    assert {"127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"} == set(allowed.hosts)
    assert "http://127.0.0.1:*" in allowed.origins and "https://localhost:*" in allowed.origins
    assert not any("attacker" in origin for origin in allowed.origins)


def test_added_names_keep_their_port_or_take_any() -> None:
    allowed = allowed_hosts(["SIE.internal", "gw.example:8443", "[fd00::1]", " "])
    assert {"sie.internal", "sie.internal:*", "gw.example:8443", "[fd00::1]", "[fd00::1]:*"} <= set(allowed.hosts)
    assert "gw.example:*" not in allowed.hosts and "" not in allowed.hosts
    assert "https://gw.example:8443" in allowed.origins and "http://sie.internal:*" in allowed.origins


def test_a_star_turns_the_check_off() -> None:
    assert not allowed_hosts(["sie.internal", "*"]).enforced
