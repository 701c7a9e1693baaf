"""docs/models.md: its worked example is the catalog's file, and every family it lists exists."""

from __future__ import annotations

import re
from pathlib import Path

from sie_server.catalog.families import FAMILIES
from sie_server.catalog.loader import parse_config_file

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "models.md"
EXAMPLE = re.compile(r"<!-- example:(?P<file>[\w.-]+\.yaml) -->\n```yaml\n(?P<body>.*?)```", re.S)


def test_the_worked_example_is_the_catalogs_file_and_parses(tmp_path: Path) -> None:
    examples = list(EXAMPLE.finditer(DOC.read_text()))
    assert examples, "docs/models.md has no worked example"
    for match in examples:
        catalog_file = ROOT / "configs" / "models" / match["file"]
        assert match["body"] == catalog_file.read_text(), f"docs/models.md's {match['file']} differs from the catalog's"
        copy = tmp_path / match["file"]
        copy.write_text(match["body"])
        assert parse_config_file(copy).id.replace("/", "__") + ".yaml" == match["file"]


def test_the_families_table_lists_every_family() -> None:
    listed = set(re.findall(r"^\| `(\w+)` \|", DOC.read_text(), re.M))
    assert listed == set(FAMILIES)
