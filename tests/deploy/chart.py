"""Render deploy/helm/sie offline with Helm's own engine (helm-python-sdk binds Helm v4's Go SDK).

The NATS dependency is not vendored (fetching it needs the chart repository), so renders run on a
copy of the chart with an empty stand-in `charts/nats`; the official chart's own objects are not
rendered or checked here.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "sie"
VALUES_FILES = {"defaults": None, "cpu": CHART / "values-cpu.yaml", "gpu": CHART / "values-gpu.yaml"}
RELEASE = "sie"
NAMESPACE = "ml"

# the version of the NATS chart that the stand-in claims to be (inside Chart.yaml's range)
STUB_NATS_VERSION = "1.3.0"


# A stand-in NATS template that evaluates the secret names in nats.container.env the way the official
# chart evaluates a `$tplYaml` value: `tpl` with the NATS chart's own context (its values and global).
NATS_ENV_PROBE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: nats-env-probe
data:
  {{- range $name, $env := .Values.container.env }}
  {{ $name }}: {{ tpl (index $env.valueFrom.secretKeyRef.name "$tplYaml") $ | quote }}
  {{- end }}
"""


def chart_copy(destination: Path, *, nats_env_probe: bool = False) -> Path:
    """A copy of the chart with a stand-in NATS subchart in charts/ (``nats_env_probe``: one that renders
    the Secret names the NATS container reads its login from, as ConfigMap nats-env-probe)."""
    target = destination / "sie"
    shutil.copytree(CHART, target, ignore=shutil.ignore_patterns("charts", "Chart.lock"))
    stub = target / "charts" / "nats"
    stub.mkdir(parents=True)
    (stub / "Chart.yaml").write_text(
        f"apiVersion: v2\nname: nats\nversion: {STUB_NATS_VERSION}\ndescription: stand-in for the NATS chart\n"
    )
    (stub / "values.yaml").write_text("{}\n")
    if nats_env_probe:
        (stub / "templates").mkdir()
        (stub / "templates" / "probe.yaml").write_text(NATS_ENV_PROBE)
    return target


def values_file(name: str) -> dict[str, Any]:
    path = VALUES_FILES[name]
    if path is None:
        return {}
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's layering of values: maps merge key by key, anything else (lists too) is replaced."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def effective_values(name: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """values.yaml, then the named values file, then overrides: what the templates see."""
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    return merged(merged(defaults, values_file(name)), overrides or {})


@dataclass
class Rendered:
    docs: list[tuple[str, dict[str, Any]]]  # (template path, object)
    notes: str

    def objects(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [doc for _, doc in self.docs if kind is None or doc["kind"] == kind]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found = [doc for doc in self.objects(kind) if doc["metadata"]["name"] == name]
        assert len(found) == 1, (
            f"{kind}/{name}: found {len(found)} in {[d['metadata']['name'] for d in self.objects(kind)]}"
        )
        return found[0]

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(self.docs)


def render(chart_dir: Path, values: dict[str, Any], release: str = RELEASE, namespace: str = NAMESPACE) -> Rendered:
    import helm_python

    chart = helm_python.Chart.load(chart_dir)
    manifests = chart.render(values, name=release, namespace=namespace, is_install=True)
    docs: list[tuple[str, dict[str, Any]]] = []
    notes = ""
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        for doc in yaml.safe_load_all(text):
            if doc is not None:
                assert isinstance(doc, dict), f"{path}: a document that is not a mapping"
                docs.append((path, doc))
    return Rendered(docs, notes)


def fullname(release: str = RELEASE) -> str:
    """The chart's fullname for a release (the objects' name prefix)."""
    return release if "sie" in release else f"{release}-sie"


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: dict[str, Any] = containers[0]
    return result
