"""Run a short script in a fresh Python process (a store reopened with nothing passed in)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_fresh(script: str, *, env: dict[str, str] | None = None, timeout: float = 120.0) -> str:
    """The script's stdout; a failing script fails the test with its stderr."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"fresh process failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout.strip()
