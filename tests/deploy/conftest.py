"""The chart copied once per module, and rendered once per values file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.chart import VALUES_FILES, Rendered, chart_copy, render, values_file


@pytest.fixture(scope="module")
def chart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return chart_copy(tmp_path_factory.mktemp("chart"))


@pytest.fixture(scope="module", params=sorted(VALUES_FILES))
def case(request: pytest.FixtureRequest, chart_dir: Path) -> tuple[str, Rendered]:
    name: str = request.param
    return name, render(chart_dir, values_file(name))
