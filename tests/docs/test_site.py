"""The documentation site (mkdocs.yml, docs/) builds with --strict, offline, and a broken link or anchor fails it;
its HTTP reference is the server's own OpenAPI spec and its deploy and benchmark pages are their files' sections."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sie_server.catalog.loader import parse_config_file
from tests.docs.hooks import ROOT, load

MKDOCS = Path(sys.executable).with_name("mkdocs")
# what the hooks read besides docs/ and mkdocs.yml
INPUTS = ["scripts/gen_catalog_table.py", "configs/models", "deploy/README.md", "benchmarks/RESULTS.md"]

openapi_ref = load("docs/hooks/openapi_ref.py")
include = load("docs/hooks/include.py")


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [str(MKDOCS), "build", "--strict", "-f", str(root / "mkdocs.yml"), "--site-dir", str(site)]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)


def copy_of_the_site_sources(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    for relative in INPUTS:
        source, target = ROOT / relative, root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    return root


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    built = build(ROOT, site)
    assert built.returncode == 0, built.stdout + built.stderr
    return site


def test_the_site_builds_strict_with_every_page_in_the_navigation(site: Path) -> None:
    for page in ("index.html", "quickstart/index.html", "tasks/extract/guards/index.html", "catalog/index.html"):
        assert (site / page).is_file(), page
    html = (site / "index.html").read_text()
    assert "fonts.googleapis.com" not in html  # theme.font: false, nothing fetched when a page is read


def test_the_http_reference_is_the_servers_openapi_spec(site: Path) -> None:
    spec = openapi_ref.build_spec()
    assert json.loads((site / "reference" / "openapi.json").read_text()) == spec
    routes = (site / "reference" / "http" / "index.html").read_text()
    schemas = (site / "reference" / "schemas" / "index.html").read_text()
    for path, operations in spec["paths"].items():
        for method in operations:
            assert f'id="{openapi_ref.operation_anchor(method, path)}"' in routes, (method, path)
    for name in spec["components"]["schemas"]:
        assert f'id="{openapi_ref.schema_anchor(name)}"' in schemas, name


def test_the_catalog_page_lists_every_model(site: Path) -> None:
    page = (site / "catalog" / "index.html").read_text()
    gen = load("scripts/gen_catalog_table.py")
    for config in sorted(gen.CATALOG.glob("*.yaml")):
        model_id = parse_config_file(config).id
        assert f"<td>{model_id}</td>" in page, model_id


@pytest.mark.parametrize(
    ("added", "named"),
    [("[a page](nowhere.md)", "nowhere.md"), ("[a route](reference/http.md#no-such-route)", "no-such-route")],
    ids=["link", "anchor"],
)
def test_a_broken_link_or_anchor_fails_the_strict_build(tmp_path: Path, added: str, named: str) -> None:
    root = copy_of_the_site_sources(tmp_path)
    page = root / "docs" / "security.md"
    page.write_text(page.read_text() + f"\nSee {added}.\n")
    built = build(root, tmp_path / "site")
    assert built.returncode != 0
    assert named in built.stdout + built.stderr


def test_an_include_takes_its_section_and_refuses_a_missing_one(tmp_path: Path) -> None:
    (tmp_path / "guide.md").write_text(
        "# Guide\n\n## One\n\nfirst\n\n```bash\n# not a heading\n```\n\n### Deeper\n\nkept\n\n## Two\n\nsecond\n"
    )
    one = include.expand("<!-- include: guide.md#One -->", tmp_path)
    assert one == "first\n\n```bash\n# not a heading\n```\n\n### Deeper\n\nkept"
    assert include.expand("<!-- include: guide.md -->", tmp_path).startswith("## One")
    with pytest.raises(ValueError, match="Three"):
        include.expand("<!-- include: guide.md#Three -->", tmp_path)
    with pytest.raises(ValueError, match=r"missing\.md"):
        include.expand("<!-- include: missing.md#One -->", tmp_path)
