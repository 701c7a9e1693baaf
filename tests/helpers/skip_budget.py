"""The skip budget: a pass of the suite fails when more tests skip than tests/skip_budget.toml allows.

A skip is a test that did not run. The budget file holds the most skips each pass of ``make test``
may have (``server``: the first pass; ``gateway``: the pass with ``SIE_TEST_TARGET=gateway``), so a
new skip, or an old one that starts firing, fails the run instead of hiding among the dots.

The check runs on every session, whatever it selects: a subset of a pass cannot skip more than the
whole pass, so only a real regression (or an environment missing what ``make test`` installs) trips
it. ``tests/README.md`` says how to change the budget.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

BUDGET_FILE = Path(__file__).resolve().parents[1] / "skip_budget.toml"
RESULT_KEY = pytest.StashKey[str]()


def budget_file() -> Path:
    return Path(os.environ.get("SIE_SKIP_BUDGET_FILE", BUDGET_FILE))


def target() -> str:
    return os.environ.get("SIE_TEST_TARGET", "server")


def read_budget(path: Path, pass_name: str) -> int:
    """The most skips allowed in ``pass_name``; a file without that pass is an error, not 'no limit'."""
    budgets = tomllib.loads(path.read_text())
    if pass_name not in budgets:
        raise KeyError(f"{path} has no skip budget for the {pass_name!r} pass (it has: {', '.join(budgets)})")
    return int(budgets[pass_name])


def verdict(skipped: int, budget: int, pass_name: str, path: Path) -> str | None:
    """The failure message when ``skipped`` is over ``budget``, else None."""
    if skipped <= budget:
        return None
    return (
        f"skip budget exceeded: {skipped} tests skipped in the {pass_name!r} pass, at most {budget} allowed "
        f"({path}). Make the new skips run (their reasons are in the short test summary), or, if a skip "
        f"is right, raise the budget in that file and say why in the commit."
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return  # interrupted, usage error, nothing collected: no verdict on skips
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter is not None else 0
    path, pass_name = budget_file(), target()
    message = verdict(skipped, read_budget(path, pass_name), pass_name, path)
    if message is not None:
        session.config.stash[RESULT_KEY] = message
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    message = terminalreporter.config.stash.get(RESULT_KEY, None)
    if message is not None:
        terminalreporter.section("skip budget", red=True)
        terminalreporter.write_line(message, red=True)
