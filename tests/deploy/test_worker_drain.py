"""deploy/helm/sie: a worker's (and the gateway's) drain ends before Kubernetes kills it, so the work it still runs
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


@pytest.mark.parametrize(
    ("values", "grace", "drain"),
    [({}, 60, 45.0), ({"holdSeconds": 100}, 130, 115.0), ({"terminationGracePeriodSeconds": 200}, 200, 185.0)],
)
def test_the_gateways_drain_ends_before_its_kill(
    chart_dir: Path, values: dict[str, object], grace: int, drain: float
) -> None:
    rendered = render(chart_dir, {"gateway": values})
    gateway = rendered.get("Deployment", f"{fullname()}-gateway")
    spec = gateway["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == grace
    args = cli.build_parser().parse_args(container(gateway)["args"])
    assert args.drain_timeout_s == drain < grace
