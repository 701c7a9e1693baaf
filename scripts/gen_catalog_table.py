"""Write the README's model table from the catalog's YAML files (``configs/models/``).

The table sits between the markers ``<!-- catalog-table:start -->`` and
``<!-- catalog-table:end -->``; everything between them is replaced.

    python scripts/gen_catalog_table.py          # rewrite README.md
    python scripts/gen_catalog_table.py --check  # exit 1 if README.md's table is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sie_server.catalog.loader import parse_config_file
from sie_server.catalog.table import markdown_table

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CATALOG = ROOT / "configs" / "models"
START, END = "<!-- catalog-table:start -->", "<!-- catalog-table:end -->"


def rendered(readme: str, catalog: Path = CATALOG) -> str:
    """``readme`` with its table replaced by the one the catalog gives."""
    before, found, rest = readme.partition(START)
    _, found_end, after = rest.partition(END)
    if not (found and found_end):
        raise ValueError(f"README.md lacks the {START} ... {END} markers")
    table = markdown_table(parse_config_file(path) for path in sorted(catalog.glob("*.yaml")))
    return f"{before}{START}\n{table}\n{END}{after}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md's table is stale")
    args = parser.parse_args()
    current = README.read_text()
    wanted = rendered(current)
    if args.check:
        if current != wanted:
            print("README.md's model table is stale: run `make catalog-table`", file=sys.stderr)
            return 1
        return 0
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
