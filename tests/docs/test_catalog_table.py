"""The Models page's catalog table is what the catalog's YAML files say (scripts/gen_catalog_table.py, put on
the page at build time by docs/hooks/catalog.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sie_server.catalog.loader import parse_config_file
from tests.docs.hooks import load

gen = load("scripts/gen_catalog_table.py")


def rows(page: str) -> list[str]:
    table = page.split(gen.START)[1].split(gen.END)[0]
    return [line.split(" | ")[0].removeprefix("| ") for line in table.strip().splitlines()[2:]]


def test_the_page_gets_one_row_per_config_and_a_new_file_changes_the_table(tmp_path: Path) -> None:
    page = gen.PAGE.read_text()
    configs = sorted(gen.CATALOG.glob("*.yaml"))
    assert sorted(rows(gen.rendered(page))) == sorted(parse_config_file(p).id for p in configs)
    for path in configs:  # a copy of the catalog with one more model: the table must gain its row
        (tmp_path / path.name).write_text(path.read_text())
    extra = configs[0].read_text().replace(parse_config_file(configs[0]).id, "zz-test/extra-model", 1)
    (tmp_path / "zz-test__extra-model.yaml").write_text(extra)
    assert "| zz-test/extra-model |" in gen.rendered(page, tmp_path)
    assert "zz-test/extra-model" not in gen.rendered(page)


def test_the_hook_fills_only_pages_with_the_markers() -> None:
    hook = load("docs/hooks/catalog.py")
    assert hook.on_page_markdown("# no table here\n", None, None, None) == "# no table here\n"
    page = gen.PAGE.read_text()
    assert hook.on_page_markdown(page, None, None, None) == gen.rendered(page)


def test_a_page_without_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="markers"):
        gen.rendered("# no table here\n")
