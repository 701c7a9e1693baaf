"""Pydantic schema of one model config (``configs/models/*.yaml``). Unknown keys are refused."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_SHA = re.compile(r"^[0-9a-f]{40}$")
_CUSTOM_ADAPTER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
FAMILIES = frozenset({"embedding", "cross_encoder"})


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(Strict):
    """Where the weights come from, tried in order: path, package, HF cache, hub."""

    hf: str | None = None
    revision: str | None = None
    package: str | None = Field(default=None, description="import name of a package that carries the weights")
    package_subdir: str = "model"
    path: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Source:
        if not (self.hf or self.package or self.path):
            raise ValueError("source needs at least one of: hf, package, path")
        if self.hf and not (self.revision and _SHA.match(self.revision)):
            raise ValueError(f"source.hf {self.hf!r} needs a pinned revision (a 40-hex commit sha)")
        return self


class DenseSpec(Strict):
    dim: int = Field(gt=0)


class SparseSpec(Strict):
    dim: int = Field(gt=0)


class MultivectorSpec(Strict):
    dim: int = Field(gt=0)


class EncodeTask(Strict):
    dense: DenseSpec | None = None
    sparse: SparseSpec | None = None
    multivector: MultivectorSpec | None = None

    def output_types(self) -> list[str]:
        return [name for name in ("dense", "sparse", "multivector") if getattr(self, name) is not None]


class ScoreTask(Strict):
    mode: Literal["cross_encoder", "bi_encoder", "maxsim"]


class Tasks(Strict):
    encode: EncodeTask | None = None
    score: ScoreTask | None = None

    def names(self) -> list[str]:
        return [name for name in ("encode", "score") if getattr(self, name) is not None]


class Runtime(Strict):
    pooling: Literal["mean", "cls", "last_token"] = "mean"
    normalize: bool = True
    query_prefix: str = ""
    doc_prefix: str = ""
    instruction_template: str = Field(
        default="{instruction}{text}",
        description="how an `instruction` is joined to a query; {instruction} and {text} are filled in",
    )
    activation: Literal["none", "sigmoid"] = Field(
        default="none", description="cross-encoders: applied to the logit before it is returned"
    )


class Profile(Strict):
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    max_batch_tokens: int = Field(default=8192, gt=0)
    max_batch_wait_ms: float = Field(default=0.0, ge=0)
    attn: Literal["sdpa", "eager"] = "sdpa"
    activation_reserve_bytes: int | None = Field(
        default=None,
        ge=0,
        description="bytes held for one full batch; estimated from the model config if unset",
    )


class ModelConfig(Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$")
    source: Source
    adapter: str = Field(
        description="a family (embedding, cross_encoder) or a custom adapter class as 'package.module:Class'"
    )
    tasks: Tasks
    max_sequence_length: int = Field(gt=0)
    runtime: Runtime = Runtime()
    profiles: dict[Literal["cpu", "cuda"], Profile]
    description: str = ""

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if self.adapter not in FAMILIES and not _CUSTOM_ADAPTER.match(self.adapter):
            raise ValueError(f"adapter must be one of {sorted(FAMILIES)} or 'package.module:Class'")
        if "cpu" not in self.profiles:
            raise ValueError("profiles needs a 'cpu' entry (the fallback for every device)")
        if not self.tasks.names():
            raise ValueError("tasks must declare at least one of: encode, score")
        if self.adapter == "cross_encoder" and (
            self.tasks.encode is not None or self.tasks.score is None or self.tasks.score.mode != "cross_encoder"
        ):
            raise ValueError("a cross_encoder declares only tasks.score with mode: cross_encoder")
        if self.adapter == "embedding":
            if self.tasks.encode is None or self.tasks.encode.dense is None:
                raise ValueError("an embedding model declares tasks.encode.dense")
            if self.tasks.score is not None and self.tasks.score.mode != "bi_encoder":
                raise ValueError("an embedding model scores with mode: bi_encoder")
        return self

    def profile(self, device_kind: str) -> Profile:
        for kind, profile in self.profiles.items():
            if kind == device_kind:
                return profile
        return self.profiles["cpu"]
