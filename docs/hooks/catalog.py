"""MkDocs hook: the Models page's catalog table, generated at build time from ``configs/models/*.yaml``.

``scripts/gen_catalog_table.py`` renders it; the page holds only its markers, so the table is never stale.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gen_catalog_table.py"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_catalog_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_GEN = script()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **kwargs: Any) -> str:
    if _GEN.START not in markdown:
        return markdown
    rendered: str = _GEN.rendered(markdown)
    return rendered
