"""The precision a CPU model runs in, chosen at load behind a quality gate.

A cpu profile lists the precisions it allows (``cpu_precision``, e.g. ``[int8, bf16, fp32]``;
``--cpu-precision`` overrides it for every model). They are tried in order: one this CPU
does not support (``sie_server.cpu_features``) is skipped; one it supports is applied to a
copy of the float32 model (bf16: the weights cast to bfloat16; int8: dynamic quantization
of every ``nn.Linear``) and must pass the gate: the probe texts below encoded at float32
and at the candidate, cosine per text, the lowest at least ``MIN_COSINE[precision]``.
The first that passes runs; float32 is always the last resort. Every refusal is logged
with its figure and kept in the model's report (``/v1/models`` shows it).

The gate compares vectors, so it serves embedding-like adapters: those with a
``probe_vectors`` method (the ``embedding`` family and its subclasses). Other families
run their profile's dtype and say so. Only the cpu device is gated; a cuda profile's
dtype is used as written. torch is imported only where a model is converted, so the
gateway can read the reports' shape without it.
"""

from __future__ import annotations

import copy
import gc
import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from sie_server.catalog.schema import Profile
from sie_server.cpu_features import CpuFeatures, Precision, detect

log = logging.getLogger(__name__)

#: the lowest cosine to float32 over the probe texts that a precision may show and still run
MIN_COSINE: dict[Precision, float] = {"bf16": 0.999, "int8": 0.99}
DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}

#: fixed probe set: short and long, prose, lists, numbers, code, several languages
PROBE_TEXTS: tuple[str, ...] = (
    "hello",
    "What is the capital of France?",
    "Invoice INV-2024-0117 from Acme Corp: 12 hours of consulting, total due 4,250.00 EUR by 31 March 2024.",
    "The cafeteria on the second floor serves lunch from 12:00 to 14:00 on weekdays.",
    "def mean(xs): return sum(xs) / len(xs)  # the average of a non-empty list",
    "Ein mehrsprachiger Satz mit Umlauten: Grüße aus München! Le café est très bon.",
    "SELECT customer_id, SUM(amount) FROM payments WHERE paid_at >= '2024-01-01' GROUP BY customer_id;",
    "Patients with type 2 diabetes who took the drug for 24 weeks lowered their HbA1c by 1.1 percentage points.",
    "1. Preheat the oven to 200 °C. 2. Slice the potatoes thinly. 3. Bake for 40 minutes, turning once.",
    "The court held that the contract was void because one party had signed it under duress, and ordered the "
    "deposit returned with interest.",
    " ".join(
        "Quarterly revenue in the EMEA region grew by eight percent, driven by new service contracts, while "
        "hardware sales declined and the company reduced its operating costs by consolidating two offices."
        for _ in range(4)
    ),
    " ".join(
        f"Section {i}: the engineer reviewed the network security policy, updated the password rules and "
        "scheduled a meeting with the data team to discuss the search index."
        for i in range(1, 9)
    ),
)


class Gated(Protocol):
    """What the gate needs of an adapter: a swappable float32 model, and vectors for texts."""

    model: Any
    device: str
    profile: Profile
    #: the precision ``model`` is in right now (set by the gate while it tries a candidate)
    precision: Precision

    def probe_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 vector per text (a row each), from the current ``model``."""


@dataclass(frozen=True, slots=True)
class Trial:
    """One precision the policy looked at, and what came of it."""

    precision: str  # a Precision, or a GGUF weight format (adapters/generators/gguf_formats.py)
    outcome: Literal["chosen", "unsupported", "refused", "failed"]
    detail: str
    min_cosine: float | None = None
    mean_cosine: float | None = None
    threshold: float | None = None
    top1: float | None = None  # GGUF formats: next-token top-1 agreement with the file as shipped
    kl: float | None = None  # and mean KL(shipped || copy), nats
    speedup: float | None = None  # and the RAG-shaped probe's speed against the file as shipped

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "precision": self.precision,
            "outcome": self.outcome,
            "detail": self.detail,
            "min_cosine": self.min_cosine,
            "mean_cosine": self.mean_cosine,
            "threshold": self.threshold,
        }
        if self.top1 is not None:
            out.update(top1_agreement=self.top1, kl=self.kl, speedup=self.speedup)
        return out


@dataclass(frozen=True, slots=True)
class PrecisionReport:
    """The precision a loaded model runs in, what was allowed, and why."""

    running: str
    allowed: tuple[str, ...]
    reason: str
    trials: tuple[Trial, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "running": self.running,
            "allowed": list(self.allowed),
            "reason": self.reason,
            "gate": [t.as_dict() for t in self.trials],
        }


def cosines(reference: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """Cosine of each row of ``candidate`` with the same row of ``reference``."""
    ref = np.asarray(reference, dtype=np.float64)
    got = np.asarray(candidate, dtype=np.float64)
    norms = np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1)
    return np.asarray(np.sum(ref * got, axis=1) / np.maximum(norms, 1e-12))


def convert(model: Any, precision: Precision) -> Any:
    """A copy of a float32 ``model`` in ``precision`` (the original is left as it was)."""
    import torch

    if precision == "bf16":
        return copy.deepcopy(model).to(torch.bfloat16)
    if precision == "int8":
        from torch.ao.quantization import quantize_dynamic

        with warnings.catch_warnings():
            # torch 2.13 marks eager-mode quantization and quantized tensors as deprecated (torchao is
            # the successor, not a dependency here); the kernels are current and the warnings say nothing
            # a server operator can act on
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*deprecated", category=UserWarning)
            quantize: Any = quantize_dynamic  # untyped in torch
            return quantize(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=False)
    return model


def packed_bytes(model: Any) -> int:
    """Bytes held in dynamically quantized layers' packed weights (not among a module's parameters)."""
    import torch

    total = 0
    for module in model.modules():
        if type(module).__name__ != "LinearPackedParams":
            continue
        for tensor in module._weight_bias():
            if isinstance(tensor, torch.Tensor):
                total += tensor.numel() * tensor.element_size()
    return total


class PrecisionPolicy:
    """Tries the allowed precisions in order; the first supported one that passes the gate wins."""

    def __init__(
        self,
        allowed: Sequence[Precision],
        features: CpuFeatures,
        *,
        probe_texts: Sequence[str] = PROBE_TEXTS,
        min_cosine: dict[Precision, float] | None = None,
    ):
        self.allowed = tuple(dict.fromkeys(allowed))
        self.features = features
        self.probe_texts = tuple(probe_texts)
        self.min_cosine = {**MIN_COSINE, **(min_cosine or {})}

    def choose(self, adapter: Gated, name: str = "") -> PrecisionReport:
        """Leaves ``adapter.model`` in the chosen precision and returns why it was chosen."""
        label = name or type(adapter).__name__
        if self.allowed[:1] == ("fp32",) or not self.allowed:
            return PrecisionReport("fp32", self.allowed, "fp32: first in the allowed list")
        reference_model = adapter.model
        reference: list[np.ndarray] = []  # float32 probe vectors, computed once a candidate is supported
        trials: list[Trial] = []
        for precision in self.allowed:
            if precision == "fp32":
                break
            trial = self._try(adapter, reference_model, reference, precision)
            trials.append(trial)
            if trial.outcome == "chosen":
                del reference_model
                gc.collect()
                log.info("%s runs in %s: %s", label, precision, trial.detail)
                earlier = "".join(f"; {t.precision} {t.detail}" for t in trials[:-1])
                reason = f"{precision} {trial.detail}{earlier}"
                return PrecisionReport(precision, self.allowed, reason, tuple(trials))
            adapter.model, adapter.precision = reference_model, "fp32"
            log_at = log.warning if trial.outcome in ("refused", "failed") else log.info
            log_at("%s: %s %s", label, precision, trial.detail)
        why = "; ".join(f"{t.precision} {t.detail}" for t in trials)
        return PrecisionReport("fp32", self.allowed, f"fp32: {why}", tuple(trials))

    def _try(self, adapter: Gated, reference_model: Any, reference: list[np.ndarray], precision: Precision) -> Trial:
        if not self.features.supports(precision):
            return Trial(precision, "unsupported", f"not supported: {self.features.missing(precision)}")
        threshold = self.min_cosine[precision]
        if not reference:
            reference.append(adapter.probe_vectors(self.probe_texts))
        try:
            adapter.model, adapter.precision = convert(reference_model, precision), precision
            found = cosines(reference[0], adapter.probe_vectors(self.probe_texts))
        except Exception as exc:  # a kernel this build lacks, say: fall back, do not fail the load
            log.exception("trying %s failed", precision)
            return Trial(precision, "failed", f"failed to run: {type(exc).__name__}: {exc}", threshold=threshold)
        low, mean = float(found.min()), float(found.mean())
        figures = f"min cosine {low:.4f} (mean {mean:.4f}) vs fp32 over {len(found)} probe texts"
        if low >= threshold:
            return Trial(precision, "chosen", f"passed the gate: {figures} >= {threshold}", low, mean, threshold)
        return Trial(precision, "refused", f"refused by the gate: {figures} < {threshold}", low, mean, threshold)


def apply_cpu_precision(adapter: Gated, features: CpuFeatures | None = None) -> PrecisionReport:
    """Called by an adapter once its float32 model is loaded: choose and apply its CPU precision."""
    profile = adapter.profile
    allowed = tuple(profile.cpu_precision)
    if not adapter.device.startswith("cpu") or profile.dtype != "float32":
        return fixed_report(profile, adapter.device, allowed)
    policy = PrecisionPolicy(profile.cpu_precision, features or detect())
    return policy.choose(adapter, getattr(getattr(adapter, "config", None), "id", ""))


def fixed_report(
    profile: Profile, device: str, allowed: Sequence[str] = ("fp32",), family: str = ""
) -> PrecisionReport:
    """The report of a model whose precision is its profile's dtype, with no gate run."""
    running = DTYPE_NAMES[profile.dtype]
    allowed_t = tuple(allowed)
    if not device.startswith("cpu"):
        return PrecisionReport(running, (running,), f"{running}: the {device} profile's dtype (no CPU gate)")
    if profile.dtype != "float32":
        return PrecisionReport(running, (running,), f"{running}: the cpu profile's dtype {profile.dtype}")
    if family and allowed_t != ("fp32",):
        why = f"fp32: the {family} adapter has no precision gate (embedding models only); allowed {list(allowed_t)}"
        return PrecisionReport("fp32", allowed_t, why)
    return PrecisionReport("fp32", allowed_t, "fp32: first in the allowed list")
