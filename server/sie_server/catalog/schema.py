"""Pydantic schema of one model config (``configs/models/*.yaml``). Unknown keys are refused."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_SHA = re.compile(r"^[0-9a-f]{40}$")
_CUSTOM_ADAPTER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# family -> (tasks it must declare, tasks it may declare)
FAMILIES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "embedding": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "cross_encoder": (frozenset({"score"}), frozenset({"score"})),
    "splade": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "colbert": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "bge_m3": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "clip": (frozenset({"encode"}), frozenset({"encode", "score"})),
    "gliner": (frozenset({"extract"}), frozenset({"extract"})),
    "causal_lm": (frozenset({"generate"}), frozenset({"generate"})),
}
SCORE_MODES = {
    "embedding": "bi_encoder",
    "cross_encoder": "cross_encoder",
    "splade": "sparse_dot",
    "colbert": "maxsim",
    "bge_m3": "bi_encoder",
    "clip": "bi_encoder",
}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(Strict):
    """Where the weights come from, tried in order: path, package, HF cache, hub."""

    hf: str | None = None
    revision: str | None = None
    package: str | None = Field(default=None, description="import name of a package that carries the weights")
    package_subdir: str = "model"
    gguf_file: str | None = Field(
        default=None, description="a GGUF file in the package folder, converted once to a cached safetensors folder"
    )
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
    mode: Literal["cross_encoder", "bi_encoder", "maxsim", "sparse_dot"]


class ExtractTask(Strict):
    max_labels: int = Field(default=25, gt=0, description="labels one request may ask for")
    threshold: float = Field(default=0.5, ge=0, le=1, description="default minimum span score")


class GenerateTask(Strict):
    chat: bool = Field(default=True, description="messages are rendered with the tokenizer's chat template")


class Tasks(Strict):
    encode: EncodeTask | None = None
    score: ScoreTask | None = None
    extract: ExtractTask | None = None
    generate: GenerateTask | None = None

    def names(self) -> list[str]:
        return [name for name in ("encode", "score", "extract", "generate") if getattr(self, name) is not None]


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
    # ColBERT: marker tokens put after [CLS], query padding with [MASK] to a fixed length, punctuation masking
    query_marker: str | None = None
    doc_marker: str | None = None
    query_max_length: int = Field(default=32, gt=0)
    query_augment: bool = True
    mask_punctuation: bool = True
    # CLIP/SigLIP: SigLIP text towers were trained on text padded to max_sequence_length
    pad_to_max_length: bool = False


class Profile(Strict):
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    max_batch_tokens: int = Field(default=8192, gt=0)
    max_batch_wait_ms: float = Field(default=0.0, ge=0)
    max_padding_ratio: float = Field(
        default=1.25, ge=1.0, description="a batch stops growing when padded tokens would exceed this x real tokens"
    )
    min_batch_tokens: int = Field(default=512, ge=1, description="below this many padded tokens padding is not limited")
    attn: Literal["sdpa", "eager"] = "sdpa"
    backend: Literal["transformers", "sglang"] = Field(
        default="transformers", description="causal LMs on CUDA may run on SGLang inside the memory budget"
    )
    activation_reserve_bytes: int | None = Field(
        default=None,
        ge=0,
        description="bytes held for one full batch; estimated from the model config if unset",
    )


class Architecture(Strict):
    """What the weights are, for listings and for the catalog test that builds a tiny model of the same shape."""

    model_type: str = Field(description="transformers model_type: bert, xlm-roberta, modernbert, llama, clip, ...")
    hidden_size: int = Field(gt=0)
    trust_remote_code: bool = Field(default=False, description="the hub repo ships its own modelling code")


class ModelConfig(Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$")
    source: Source
    architecture: Architecture | None = None
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
        if "cpu" not in self.profiles:
            raise ValueError("profiles needs a 'cpu' entry (the fallback for every device)")
        if self.profiles["cpu"].backend != "transformers":
            raise ValueError("the cpu profile runs on transformers; sglang is for cuda profiles")
        if any(p.backend == "sglang" for p in self.profiles.values()) and self.adapter != "causal_lm":
            raise ValueError("backend: sglang serves causal_lm models only")
        declared = set(self.tasks.names())
        if not declared:
            raise ValueError("tasks must declare at least one of: encode, score, extract, generate")
        if self.adapter in FAMILIES:
            required, allowed = FAMILIES[self.adapter]
            if not required <= declared or not declared <= allowed:
                raise ValueError(
                    f"a {self.adapter} model declares tasks {sorted(required)} (may add {sorted(allowed - required)}); "
                    f"this one declares {sorted(declared)}"
                )
            mode = SCORE_MODES.get(self.adapter)
            if self.tasks.score is not None and self.tasks.score.mode != mode:
                raise ValueError(f"a {self.adapter} model scores with mode: {mode}")
        elif not _CUSTOM_ADAPTER.match(self.adapter):
            raise ValueError(f"adapter must be one of {sorted(FAMILIES)} or 'package.module:Class'")
        if self.adapter == "embedding" and (self.tasks.encode is None or self.tasks.encode.dense is None):
            raise ValueError("an embedding model declares tasks.encode.dense")
        return self

    @property
    def accepts_images(self) -> bool:
        return self.adapter == "clip"

    def profile(self, device_kind: str) -> Profile:
        for kind, profile in self.profiles.items():
            if kind == device_kind:
                return profile
        return self.profiles["cpu"]
