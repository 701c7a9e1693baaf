"""Writes the Grafana dashboards in this folder from the panel lists in engine_dashboard.py and
cluster_dashboard.py (their parts are in panels.py).

    python deploy/grafana/build_dashboards.py           # rewrite sie-engine.json and sie-cluster.json
    python deploy/grafana/build_dashboards.py --check   # exit 1 if a committed file differs

Edit the panels there, not the JSON. Every expression may use only the metrics that sie-server
and the gateway export (docs/operate/metrics.md); tests/deploy checks that, and that the JSON files are
this script's output. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# the dashboard modules beside this file, also when it is loaded by its path (tests/deploy)
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_dashboard import cluster_dashboard
from engine_dashboard import engine_dashboard

HERE = Path(__file__).resolve().parent

DASHBOARDS = {"sie-engine.json": engine_dashboard, "sie-cluster.json": cluster_dashboard}


def render(build: Any) -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only compare with the committed files")
    args = parser.parse_args(argv)
    stale = []
    for name, build in DASHBOARDS.items():
        text, path = render(build), HERE / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date: {', '.join(stale)}; run python {Path(__file__).name}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
