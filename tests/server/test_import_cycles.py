"""No two modules of the server import each other, at the top, inside a function or under TYPE_CHECKING:
a circle hides which one is the lower layer (issue 47 removed the last three)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "server" / "sie_server"


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module of the package that ``name`` imports anywhere in its file."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join(base[: len(base) - node.level + 1] + ([module] if module else []))
            targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        found |= {t for t in targets if t in known and t != name}
    return found


def test_no_two_modules_import_each_other() -> None:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    circles = sorted({tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph[b]})
    assert circles == []
    assert "sie_server.engine.service" in graph["sie_server.engine.frontdoor"]  # the graph was read
