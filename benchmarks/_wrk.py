"""Driving a server with ``wrk`` (a C load generator whose own CPU cost is small): one corpus text per request.

The Lua script holds the corpus as JSON bodies (``{"items":[{"text": ...}]}``, what a curl
user sends) and each request takes the next one, cycling; each of ``connections`` keeps one
request in flight. wrk runs for a fixed time, so its texts/s is completed requests over that
time (it stops counting in-flight requests at the end).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_SCRIPT_TAIL = """
local next_body = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  next_body = next_body % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[next_body])
end
"""
_COUNT = re.compile(r"^\s*(\d+) requests in ([\d.]+)(\w+)", re.MULTILINE)
_ERRORS = re.compile(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def available() -> bool:
    return shutil.which("wrk") is not None


def write_script(path: Path, texts: list[str]) -> Path:
    """A wrk Lua script that posts ``texts`` one per request, in order, cycling."""
    lines = ["bodies = {"]
    for text in texts:
        body = json.dumps({"items": [{"text": text}]})
        if "]==]" in body:  # cannot be inside a Lua long string; the corpus never has it
            raise ValueError("text holds ']==]'")
        lines.append(f"  [==[{body}]==],")
    lines.append("}")
    path.write_text("\n".join(lines) + _SCRIPT_TAIL)
    return path


@dataclass
class WrkRun:
    requests: int
    seconds: float  # wrk's own duration
    errors: str  # "" when every response was 2xx and no socket error happened
    output: str


def run(url: str, script: Path, *, connections: int, seconds: float) -> WrkRun:
    """``wrk -t1 -c<connections> -d<seconds>s`` against ``url`` with ``script``."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "600s", "-s", str(script), url]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    match = _COUNT.search(out)
    if match is None:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    errors = "; ".join(m.group(0) for m in _ERRORS.finditer(out))
    return WrkRun(int(match[1]), float(match[2]) * _UNITS[match[3]], errors, out)
