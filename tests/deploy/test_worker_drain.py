"""deploy/helm/sie: a worker's drain ends before Kubernetes kills it, so the work it still runs
then is answered (503, retry elsewhere) instead of being cut off."""

from __future__ import annotations

from pathlib import Path

import pytest

from sie_server import cli
from tests.deploy.chart import container, fullname, render


@pytest.mark.parametrize(("grace", "drain"), [(None, 105.0), (60, 45.0), (10, 5.0)])
def test_a_workers_drain_ends_before_its_kill(chart_dir: Path, grace: int | None, drain: float) -> None:
    pool: dict[str, object] = (
        {"name": "cpu"} if grace is None else {"name": "cpu", "terminationGracePeriodSeconds": grace}
    )
    rendered = render(chart_dir, {"pools": [pool]})
    worker = rendered.get("Deployment", f"{fullname()}-worker-cpu")
    spec = worker["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == (grace or 120)
    args = cli.build_parser().parse_args(container(worker)["args"])
    assert args.drain_timeout_s == drain < spec["terminationGracePeriodSeconds"]
