"""Fixtures for the ecosystem adapter tests: the shared SIE server, models, the corpus, no network.

Every test here may open sockets to loopback only (pytest-socket's ``allow_hosts``); the
live-Weaviate test, which runs only when ``WEAVIATE_URL`` is set, opts out with ``enable_socket``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integrations.models import require_model

HERE = Path(__file__).parent
LOOPBACK = ["127.0.0.1", "::1"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).parents and item.get_closest_marker("enable_socket") is None:
            item.add_marker(pytest.mark.allow_hosts(LOOPBACK))


@pytest.fixture
def needs_model(base_url: str) -> Callable[[str], None]:
    """``needs_model("test/tiny-splade")`` fails the test unless the live server serves it."""

    def check(model: str) -> None:
        require_model(base_url, model)

    return check
