"""The GPU check's steps against the running server: four models resident at once, the pool's charges against the
device memory really in use, LRU eviction under a budget below the five models' sum with no request failed, the
served embedder against the float32 reference, and PP-OCRv6 beside the GPU models."""

from __future__ import annotations

import base64
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np

from benchmarks._gpu_models import SPECS
from benchmarks._gpu_precision import COSINE_FLOOR, min_cosine
from benchmarks._gpu_server import counter, device_used_bytes
from tests.helpers.catalog import OCR

MIB = 2**20
#: what a process holds on a GPU beyond its allocator's reservation (CUDA context, kernels, cuBLAS workspaces)
CONTEXT_ALLOWANCE_BYTES = 2 * 2**30
FAMILY = {spec.model_id: spec.family for spec in SPECS}
TEXT = "Ada Lovelace wrote to Acme Corp in London about the invoice due on Friday."
ROUNDS = 2
REQUESTS_PER_MODEL = 4


def ask(client: httpx.Client, model_id: str, i: int = 0) -> int:
    """One small request of the model's own task; its HTTP status."""
    family, text = FAMILY[model_id], f"{TEXT} ({i})"
    if family == "embedder":
        response = client.post(f"/v1/encode/{model_id}", json={"items": [{"text": text}]})
    elif family == "reranker":
        body = {"query": {"text": "who wrote?"}, "items": [{"text": text}, {"text": "bananas are yellow"}]}
        response = client.post(f"/v1/score/{model_id}", json=body)
    elif family == "extractor":
        body = {"items": [{"text": text}], "params": {"labels": ["person", "company", "place"]}}
        response = client.post(f"/v1/extract/{model_id}", json=body)
    else:
        response = client.post(f"/v1/generate/{model_id}", json={"prompt": text, "max_new_tokens": 8})
    return response.status_code


def loaded(client: httpx.Client) -> dict[str, bool]:
    return {m["id"]: bool(m.get("loaded")) for m in client.get("/v1/models").json()["models"]}


def four_resident(client: httpx.Client, ids: list[str]) -> tuple[bool, str]:
    """The four encoders' first requests at once: each loads, all four stay resident together."""
    four = ids[:4]
    with ThreadPoolExecutor(len(four)) as pool:
        statuses = list(pool.map(lambda m: ask(client, m), four))
    now = loaded(client)
    resident = [m for m in four if now.get(m)]
    ok = statuses == [200] * 4 and len(resident) == 4
    return ok, f"statuses {statuses}; resident together: {', '.join(m.split('/')[-1] for m in resident)}"


def charges_vs_device(client: httpx.Client, device: str, baseline: int, pid: int) -> tuple[bool, str, dict[str, Any]]:
    """With the four resident: the pool's charges against the device memory in use since before the server
    started (``torch.cuda.mem_get_info`` on a GPU; the server's resident set beyond its start on CPU)."""
    memory = client.get("/v1/memory").json()
    in_use = device_used_bytes(device, pid) - baseline
    charged, allocator = memory["charged_bytes"], memory["process_bytes"]
    weights = sum(m["resident_bytes"] for m in memory["models"])
    figures = {
        "charged_mib": round(charged / MIB),
        "weights_mib": round(weights / MIB),
        "reserves_mib": round((charged - weights) / MIB),
        "allocator_mib": round(allocator / MIB),
        "device_in_use_mib": round(in_use / MIB),
        "device_minus_charged_mib": round((in_use - charged) / MIB),
        "device_minus_allocator_mib": round((in_use - allocator) / MIB),
    }
    # the weights are really there, and nothing the budget cannot see exceeds a context's worth
    ok = weights <= in_use <= charged + memory["runtime_bytes"] + CONTEXT_ALLOWANCE_BYTES
    detail = (
        f"charged {figures['charged_mib']} MiB (weights {figures['weights_mib']} + reserves "
        f"{figures['reserves_mib']}); allocator holds {figures['allocator_mib']} MiB; device in use "
        f"{figures['device_in_use_mib']} MiB: {figures['device_minus_charged_mib']:+} MiB from the charges, "
        f"{figures['device_minus_allocator_mib']:+} MiB beyond the allocator (context, kernels)"
    )
    return ok, detail, figures


class Sampler(threading.Thread):
    """The server's used bytes (``/v1/memory``) and the device's, every 0.2 s, kept at their peaks."""

    def __init__(self, url: str, device: str, baseline: int, pid: int):
        super().__init__(daemon=True)
        self.url, self.device, self.baseline, self.pid = url, device, baseline, pid
        self.peak_used = self.peak_device = 0
        self._done = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as client:
            while not self._done.is_set():
                try:
                    self.peak_used = max(self.peak_used, client.get("/v1/memory").json()["used_bytes"])
                    used = device_used_bytes(self.device, self.pid) - self.baseline
                    self.peak_device = max(self.peak_device, used)
                except (httpx.HTTPError, OSError, KeyError, ValueError):
                    pass
                self._done.wait(0.2)

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=5)


def lru(client: httpx.Client, ids: list[str], budget: int, sampler: Sampler) -> tuple[bool, str, dict[str, Any]]:
    """The fifth model (the generator) loads into a budget that holds four: the least recently used goes. Then
    every model in turn, ``REQUESTS_PER_MODEL`` concurrent requests each, for ``ROUNDS`` rounds: each switch
    evicts, and no request may fail."""
    for model_id in ids[:4]:  # used in this order: the first is the least recently used
        ask(client, model_id)
    evictions, loads = counter(client, "sie_model_evictions"), counter(client, "sie_model_loads")
    fifth = ask(client, ids[4])
    after = loaded(client)
    first_out = fifth == 200 and not after.get(ids[0]) and all(after.get(m) for m in ids[1:])
    statuses: list[int] = []
    with ThreadPoolExecutor(REQUESTS_PER_MODEL) as pool:
        for _ in range(ROUNDS):
            for model_id in ids:
                statuses += pool.map(lambda i, m=model_id: ask(client, m, i), range(REQUESTS_PER_MODEL))
    failed = [s for s in statuses if s != 200]
    evicted = counter(client, "sie_model_evictions") - evictions
    reloaded = counter(client, "sie_model_loads") - loads
    figures = {
        "requests": len(statuses) + 1,
        "failed": len(failed) + (fifth != 200),
        "evictions": int(evicted),
        "loads": int(reloaded),
        "budget_mib": round(budget / MIB),
        "peak_used_mib": round(sampler.peak_used / MIB),
        "peak_device_mib": round(sampler.peak_device / MIB),
    }
    ok = first_out and not failed and evicted >= ROUNDS * 2 and sampler.peak_used <= budget
    detail = (
        f"loading the fifth evicted the least recently used: {first_out}; {figures['requests']} requests, "
        f"{figures['failed']} failed {sorted(set(failed))}; "
        f"{figures['evictions']} evictions, {figures['loads']} loads; "
        f"peak used {figures['peak_used_mib']} of a {figures['budget_mib']} MiB budget "
        f"(device peak {figures['peak_device_mib']} MiB)"
    )
    return ok, detail, figures


def served_embedder(client: httpx.Client, model_id: str, texts: list[str], reference: np.ndarray) -> tuple[bool, str]:
    """The served vectors (the GPU profile's precision) against the float32 adapter's, over HTTP."""
    response = client.post(f"/v1/encode/{model_id}", json={"items": [{"text": t} for t in texts]})
    response.raise_for_status()
    served = np.asarray([item["dense"]["values"] for item in response.json()["items"]])
    worst = min_cosine(served, reference)
    return worst >= COSINE_FLOOR, f"min cosine {worst:.5f} over {len(texts)} texts (floor {COSINE_FLOOR})"


def ocr(client: httpx.Client) -> tuple[bool, str]:
    """PP-OCRv6 (ONNX Runtime on the CPU) on the same server reads a rendered invoice to the exact lines."""
    from tests.helpers.documents import INVOICE_LINES, png, text_image

    data = base64.b64encode(png(text_image(INVOICE_LINES))).decode()
    response = client.post(f"/v1/extract/{OCR}", json={"items": [{"images": [{"data": data}]}]})
    response.raise_for_status()
    lines = [e["text"] for e in response.json()["items"][0]["entities"]]
    return lines == INVOICE_LINES, f"read {lines}"
