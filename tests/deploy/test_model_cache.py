"""The workers' model cache (pools[].modelCache): an emptyDir by default, a PVC per pod (ephemeral) or one
ReadWriteMany PVC per pool (shared), always mounted at /cache with the same environment; the values schema
refuses combinations that would not work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest

from tests.deploy.chart import Rendered, container, fullname, render

CACHE_ENV = {"HF_HOME": "/cache/huggingface", "SIE_CACHE_DIR": "/cache/sie"}


def _pools(*pools: dict[str, Any]) -> dict[str, Any]:
    """Values with these pools; the first is the default pool, every other gets a route."""
    routes = [{"pattern": f"{p['name']}/*", "pool": p["name"]} for p in pools[1:]]
    return {"pools": list(pools), "gateway": {"defaultPool": pools[0]["name"], "routes": routes}}


def _worker(rendered: Rendered, pool: str) -> dict[str, Any]:
    return rendered.get("Deployment", f"{fullname()}-worker-{pool}")


def _cache_volume(worker: dict[str, Any]) -> dict[str, Any]:
    """The volume mounted at /cache, checked to carry the cache environment unchanged."""
    c = container(worker)
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert {k: env.get(k) for k in CACHE_ENV} == CACHE_ENV
    volumes = {v["name"]: v for v in worker["spec"]["template"]["spec"]["volumes"]}
    volume: dict[str, Any] = volumes[mounts["/cache"]]
    return volume


def _valid(doc: dict[str, Any]) -> None:
    for kube in ("1.25", "1.37"):
        kubernetes_validate.validate(doc, kube, strict=True)


def test_the_default_stays_an_emptydir_with_the_pools_size_limit(chart_dir: Path) -> None:
    rendered = render(chart_dir, {})
    volume = _cache_volume(_worker(rendered, "cpu"))
    assert volume == {"name": "cache", "emptyDir": {"sizeLimit": "20Gi"}}
    assert rendered.objects("PersistentVolumeClaim") == []
    # a pool written without modelCache (values files from before it existed) renders the same
    old = render(chart_dir, _pools({"name": "cpu", "cacheSizeLimit": "20Gi"}))
    assert _cache_volume(_worker(old, "cpu")) == volume
    unlimited = render(chart_dir, _pools({"name": "cpu"}))
    assert _cache_volume(_worker(unlimited, "cpu")) == {"name": "cache", "emptyDir": {}}
    _valid(_worker(unlimited, "cpu"))


def test_ephemeral_gives_each_pod_its_own_claim(chart_dir: Path) -> None:
    cache = {"type": "ephemeral", "size": "150Gi", "storageClass": "gp3"}
    rendered = render(chart_dir, _pools({"name": "cpu", "modelCache": cache}))
    worker = _worker(rendered, "cpu")
    template = _cache_volume(worker)["ephemeral"]["volumeClaimTemplate"]
    assert template["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "gp3",
        "resources": {"requests": {"storage": "150Gi"}},
    }
    assert template["metadata"]["labels"]["sie.dev/pool"] == "cpu"
    assert rendered.objects("PersistentVolumeClaim") == []  # Kubernetes makes one per pod from the template
    _valid(worker)


def test_ephemeral_takes_cache_size_limit_and_the_default_class_when_not_given(chart_dir: Path) -> None:
    pool = {"name": "cpu", "cacheSizeLimit": "40Gi", "modelCache": {"type": "ephemeral"}}
    spec = _cache_volume(_worker(render(chart_dir, _pools(pool)), "cpu"))["ephemeral"]["volumeClaimTemplate"]["spec"]
    assert "storageClassName" not in spec  # the cluster's default StorageClass
    assert spec["resources"]["requests"]["storage"] == "40Gi"


def test_shared_makes_one_rwx_claim_per_pool_that_every_worker_mounts(chart_dir: Path) -> None:
    full = fullname()
    shared = {"type": "shared", "storageClass": "efs-sc", "size": "500Gi"}
    rendered = render(
        chart_dir,
        _pools(
            {"name": "cpu", "modelCache": shared},
            {"name": "gpu", "device": "cuda", "gpus": 1, "modelCache": {**shared, "size": "1Ti"}},
            {"name": "spare", "cacheSizeLimit": "5Gi"},
        ),
    )
    claims = {c["metadata"]["name"]: c for c in rendered.objects("PersistentVolumeClaim")}
    assert set(claims) == {f"{full}-model-cache-cpu", f"{full}-model-cache-gpu"}
    for pool, size in (("cpu", "500Gi"), ("gpu", "1Ti")):
        claim = claims[f"{full}-model-cache-{pool}"]
        assert claim["spec"] == {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "efs-sc",
            "resources": {"requests": {"storage": size}},
        }
        assert claim["metadata"]["labels"]["sie.dev/pool"] == pool
        worker = _worker(rendered, pool)
        assert _cache_volume(worker)["persistentVolumeClaim"] == {"claimName": f"{full}-model-cache-{pool}"}
        _valid(claim)
        _valid(worker)
    assert _cache_volume(_worker(rendered, "spare")) == {"name": "cache", "emptyDir": {"sizeLimit": "5Gi"}}


def test_shared_with_an_existing_claim_creates_none(chart_dir: Path) -> None:
    pool = {"name": "cpu", "modelCache": {"type": "shared", "existingClaim": "models-nfs"}}
    rendered = render(chart_dir, _pools(pool))
    assert rendered.objects("PersistentVolumeClaim") == []
    assert _cache_volume(_worker(rendered, "cpu"))["persistentVolumeClaim"] == {"claimName": "models-nfs"}


@pytest.mark.parametrize(
    "cache",
    [
        {"type": "shared", "size": "100Gi"},  # no RWX class and no claim: the default class is rarely RWX
        {"type": "shared", "storageClass": "efs-sc"},  # no size
        {"type": "shared", "storageClass": "gp3", "size": "100Gi", "accessMode": "ReadWriteOnce"},
        {"type": "shared", "existingClaim": "mine", "storageClass": "efs-sc", "size": "1Gi"},  # which one?
        {"type": "ephemeral", "size": "10Gi", "existingClaim": "mine"},
        {"type": "emptyDir", "storageClass": "gp3"},  # an emptyDir has no class
        {"storageClass": "gp3"},  # type left to its default, emptyDir
        {"type": "hostPath"},
        {"type": "shared", "storageclass": "efs-sc", "size": "1Gi"},  # typo of storageClass
        {"type": "ephemeral", "size": "lots"},
    ],
)
def test_the_schema_refuses_a_cache_that_cannot_work(chart_dir: Path, cache: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError, match="schema"):
        render(chart_dir, _pools({"name": "cpu", "cacheSizeLimit": "20Gi", "modelCache": cache}))


def test_the_schema_refuses_an_ephemeral_cache_without_any_size(chart_dir: Path) -> None:
    with pytest.raises(helm.HelmValuesError, match="schema"):
        render(chart_dir, _pools({"name": "cpu", "modelCache": {"type": "ephemeral"}}))
