"""One model config as a whole: its parts and the checks that span them (family, tasks, backends)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from sie_server.catalog.families import CLASSIFIERS, FAMILIES, MEDIA_INPUTS, SCORE_MODES, ExtractKind, extract_kind
from sie_server.catalog.schema.profile import Profile
from sie_server.catalog.schema.runtime import Runtime
from sie_server.catalog.schema.strict import Strict
from sie_server.catalog.schema.tasks import Tasks
from sie_server.catalog.schema.weights import Architecture, Source

_CUSTOM_ADAPTER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class ModelConfig(Strict):
    # ``inputs`` is a property (what a family takes): the field is ``inputs_`` in Python and ``inputs`` in YAML
    model_config = ConfigDict(extra="forbid", frozen=True, serialize_by_alias=True, validate_by_name=True)

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
    inputs_: list[Literal["text", "image", "document", "audio"]] | None = Field(
        default=None,
        alias="inputs",
        min_length=1,
        description="the kinds of input the model takes, for a custom adapter class (a family knows its own)",
    )

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if "cpu" not in self.profiles:
            raise ValueError("profiles needs a 'cpu' entry (the fallback for every device)")
        if self.profiles["cpu"].backend == "sglang":
            raise ValueError("the cpu profile runs on transformers or llamacpp; sglang is for cuda profiles")
        for backend in ("sglang", "llamacpp"):
            used = any(p.backend == backend for p in self.profiles.values())
            if used and self.adapter in FAMILIES and self.adapter != "causal_lm":  # custom classes may subclass
                raise ValueError(f"backend: {backend} serves causal_lm models only")
        if any(p.backend == "llamacpp" for p in self.profiles.values()) and not self.source.gguf_file:
            raise ValueError("backend: llamacpp reads a GGUF file: set source.gguf_file")
        if any(p.cpu_precision != ["fp32"] for kind, p in self.profiles.items() if kind != "cpu"):
            raise ValueError("cpu_precision belongs to the cpu profile; a cuda profile sets dtype")
        if self.profiles["cpu"].cpu_precision != ["fp32"] and self.adapter in FAMILIES and self.adapter != "embedding":
            raise ValueError(f"cpu_precision other than [fp32] is gated for embedding models only, not {self.adapter}")
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
        guard = self.tasks.extract.guard if self.tasks.extract is not None else None
        if self.adapter == "causal_lm" and self.tasks.extract is not None and guard is None:
            raise ValueError("a causal_lm model declares extract only as a guard: set tasks.extract.guard")
        if guard is not None and self.adapter in FAMILIES and self.adapter != "causal_lm":
            raise ValueError(f"tasks.extract.guard runs a causal_lm model as a guard, not a {self.adapter} model")
        if self.adapter in {"embedding", "decoder_embedding"} and (
            self.tasks.encode is None or self.tasks.encode.dense is None
        ):
            raise ValueError("an embedding model declares tasks.encode.dense")
        return self

    @property
    def inputs(self) -> list[str]:
        """The kinds of input this model takes, as /v1/models lists them."""
        if self.inputs_ is not None:
            return list(self.inputs_)
        return list(MEDIA_INPUTS.get(self.adapter, ("text",)))

    @property
    def parses_documents(self) -> bool:
        """Whether its extract reads whole documents (a parser such as docling), not pictures."""
        return self.inputs == ["document"]

    @property
    def classifies(self) -> bool:
        """Whether its extract scores labels for texts (NLI, GLiClass, a sequence-classification head)."""
        return self.adapter in CLASSIFIERS

    @property
    def extract_kind(self) -> ExtractKind:
        """Which extract handler serves this model (``catalog/families.py``: its family's kind)."""
        guard = self.tasks.extract is not None and self.tasks.extract.guard is not None
        return extract_kind(self.adapter, self.inputs, guard)

    @property
    def accepts_images(self) -> bool:
        return "image" in self.inputs

    @property
    def accepts_documents(self) -> bool:
        return "document" in self.inputs

    @property
    def accepts_audio(self) -> bool:
        return "audio" in self.inputs

    def profile(self, device_kind: str) -> Profile:
        for kind, profile in self.profiles.items():
            if kind == device_kind:
                return profile
        return self.profiles["cpu"]
