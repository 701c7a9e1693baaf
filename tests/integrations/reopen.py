"""Run a short script in a fresh Python process (a store reopened with nothing passed in)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NETGUARD = Path(__file__).resolve().parent / "netguard"  # its sitecustomize blocks non-loopback sockets


def fresh_env(**extra: str) -> dict[str, str]:
    """The environment for a fresh process: loopback-only sockets, plus ``extra``."""
    pythonpath = os.pathsep.join(filter(None, [str(NETGUARD), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": pythonpath, **extra}


def run_fresh(script: str, *, env: dict[str, str] | None = None, timeout: float = 120.0) -> str:
    """The script's stdout; a failing script fails the test with its stderr."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=fresh_env(**(env or {})),
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"fresh process failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout.strip()
