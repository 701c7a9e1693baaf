"""The skip budget fails a session that skips more tests than tests/skip_budget.toml allows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.server import REPO
from tests.helpers.skip_budget import BUDGET_FILE, read_budget, verdict

THREE_TESTS = """
import pytest

def test_runs():
    pass

def test_skips():
    pytest.skip("no frobnicator here")

@pytest.mark.skip(reason="not today")
def test_marked():
    pass
"""
CONFTEST = "from tests.helpers.skip_budget import pytest_sessionfinish, pytest_terminal_summary  # noqa: F401\n"


def run_pytest(folder: Path, budget: str, target: str | None = None) -> subprocess.CompletedProcess[str]:
    (folder / "test_three.py").write_text(THREE_TESTS)
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "budget.toml").write_text(budget)
    env = {**os.environ, "PYTHONPATH": str(REPO), "SIE_SKIP_BUDGET_FILE": str(folder / "budget.toml")}
    env.pop("SIE_TEST_TARGET", None)
    if target is not None:
        env["SIE_TEST_TARGET"] = target
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(folder)]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def test_a_session_over_its_budget_fails_and_says_why(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "server = 1\ngateway = 5\n")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    assert "1 passed, 2 skipped" in result.stdout
    assert "skip budget exceeded: 2 tests skipped in the 'server' pass, at most 1 allowed" in result.stdout
    assert "no frobnicator here" in result.stdout  # -rs: the reasons are printed


def test_a_session_within_its_budget_passes(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "server = 2\ngateway = 0\n")
    assert result.returncode == pytest.ExitCode.OK, result.stdout
    assert "skip budget" not in result.stdout


def test_the_gateway_pass_has_its_own_budget(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "server = 2\ngateway = 0\n", target="gateway")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    assert "2 tests skipped in the 'gateway' pass, at most 0 allowed" in result.stdout


def test_a_pass_missing_from_the_file_is_an_error_not_no_limit(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    path.write_text("server = 3\n")
    with pytest.raises(KeyError, match="no skip budget for the 'gateway' pass"):
        read_budget(path, "gateway")


def test_the_repository_budget_covers_both_passes() -> None:
    assert read_budget(BUDGET_FILE, "server") >= 0 and read_budget(BUDGET_FILE, "gateway") >= 0
    assert verdict(3, 3, "server", BUDGET_FILE) is None  # at the budget is fine
