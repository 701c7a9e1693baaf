"""Imports run downward only: api imports neither the engine nor the cluster, the contract imports
neither, and the gateway runs without torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import sie_server

PACKAGE = Path(sie_server.__file__).parent


def imports(folder: str) -> dict[str, set[str]]:
    """module file -> the sie_server modules it imports (at any level of the file)."""
    found: dict[str, set[str]] = {}
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sie_server"):
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names if a.name.startswith("sie_server"))
        found[str(path.relative_to(PACKAGE))] = names
    return found


def offenders(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{module} imports {name}"
        for module, names in imports(folder).items()
        for name in names
        if name.startswith(forbidden)
    ]


def test_api_imports_no_engine_cluster_or_composition() -> None:
    forbidden = ("sie_server.engine", "sie_server.cluster", "sie_server.memory", "sie_server.compose")
    assert offenders("api", forbidden) == []


def test_contract_imports_only_the_bottom_layers() -> None:
    forbidden = ("sie_server.api", "sie_server.engine", "sie_server.cluster", "sie_server.memory",
                 "sie_server.adapters", "sie_server.compose")  # fmt: skip
    assert offenders("contract", forbidden) == []


def test_engine_imports_no_api_or_cluster() -> None:
    assert offenders("engine", ("sie_server.api", "sie_server.cluster", "sie_server.compose")) == []


def test_the_gateway_app_loads_without_torch() -> None:
    code = (
        "import sys; import sie_server.cluster.gateway_app, sie_server.cli; "
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith(('sie_server.engine', 'sie_server.memory'))]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout
