"""The catalog's model table (Markdown) from its YAML files (``configs/models/``).

The documentation site's Models page (``docs/catalog.md``) holds the markers
``<!-- catalog-table:start -->`` and ``<!-- catalog-table:end -->``; at build time the hook
``docs/hooks/catalog.py`` puts the table between them, so it is never stale.

    python scripts/gen_catalog_table.py          # print the table
"""

from __future__ import annotations

import sys
from pathlib import Path

from sie_server.catalog.loader import parse_config_file
from sie_server.catalog.table import markdown_table

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "catalog.md"
CATALOG = ROOT / "configs" / "models"
START, END = "<!-- catalog-table:start -->", "<!-- catalog-table:end -->"


def table(catalog: Path = CATALOG) -> str:
    return markdown_table(parse_config_file(path) for path in sorted(catalog.glob("*.yaml")))


def rendered(page: str, catalog: Path = CATALOG) -> str:
    """``page`` with whatever is between its markers replaced by the table the catalog gives."""
    before, found, rest = page.partition(START)
    _, found_end, after = rest.partition(END)
    if not (found and found_end):
        raise ValueError(f"the page lacks the {START} ... {END} markers")
    return f"{before}{START}\n{table(catalog)}\n{END}{after}"


def main() -> int:
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
