"""Read one Prometheus sample, from a server's ``/metrics`` text or an in-process registry.

A series that is not there is an error naming it and listing the series of that name that do exist
(or every metric name, when none does): a misspelt name or label must fail the test, not read as 0.
A test that means "absent counts as 0" (a labelled counter before its first increment) says so with
``absent_as_zero=True``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


class MissingSeries(LookupError, AssertionError):
    """The asked-for series is not exported."""


def _series(name: str, labels: Mapping[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def find(samples: Iterable[Sample], name: str, labels: Mapping[str, str], *, absent_as_zero: bool = False) -> float:
    """The value of the sample ``name`` with exactly ``labels``."""
    seen = list(samples)
    wanted = dict(labels)
    for sample in seen:
        if sample.name == name and sample.labels == wanted:
            return float(sample.value)
    if absent_as_zero:
        return 0.0
    same_name = sorted(_series(s.name, s.labels) for s in seen if s.name == name)
    existing = same_name or sorted({s.name for s in seen})
    raise MissingSeries(f"no series {_series(name, wanted)}; exported: {', '.join(existing) or '(nothing)'}")


def parse(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition."""
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def scrape(url: str, name: str, *, absent_as_zero: bool = False, **labels: str) -> float:
    """One sample from the server at ``url`` (its ``/metrics``)."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return find(parse(text), name, labels, absent_as_zero=absent_as_zero)


def sample(registry: CollectorRegistry, name: str, *, absent_as_zero: bool = False, **labels: str) -> float:
    """One sample from an in-process registry."""
    samples = (s for family in registry.collect() for s in family.samples)
    return find(samples, name, labels, absent_as_zero=absent_as_zero)
