"""EXPORTED_METRICS matches what the code registers: names, types and labels."""

from __future__ import annotations

from typing import Any

from prometheus_client.metrics import MetricWrapperBase

from tests.deploy.exported_metrics import COUNTER, EXPORTED_METRICS, GATEWAY_PREFIX


def _registered(holder: Any) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Exposed name -> (type, labels) of every prometheus_client metric an object holds."""
    out = {}
    for metric in vars(holder).values():
        if isinstance(metric, MetricWrapperBase):
            # prometheus_client keeps name, type and label names on these attributes
            kind, name = metric._type, metric._name  # type: ignore[attr-defined]
            exposed = f"{name}_total" if kind == COUNTER else name
            out[exposed] = (kind, tuple(metric._labelnames))  # type: ignore[attr-defined]
    return out


def _listed(gateway: bool) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {
        name: (kind, labels) for name, kind, labels in EXPORTED_METRICS if name.startswith(GATEWAY_PREFIX) == gateway
    }


def test_list_has_no_duplicates() -> None:
    names = [name for name, _, _ in EXPORTED_METRICS]
    assert len(names) == len(set(names))
    for name, kind, _ in EXPORTED_METRICS:
        assert name.startswith("sie_")
        assert name.endswith("_total") == (kind == COUNTER), name


def test_server_metrics_match_list() -> None:
    from sie_server.observability.metrics import Metrics

    assert _registered(Metrics()) == _listed(gateway=False)


def test_gateway_metrics_match_list() -> None:
    from sie_server.cluster.gateway_metrics import GatewayMetrics

    assert _registered(GatewayMetrics()) == _listed(gateway=True)
