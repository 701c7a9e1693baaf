"""Where a model's weights come from (``source``) and what they are (``architecture``)."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from sie_server.catalog.schema.strict import Strict

_SHA = re.compile(r"^[0-9a-f]{40}$")


class Source(Strict):
    """Where the weights come from, tried in order: path, package, HF cache, hub."""

    hf: str | None = None
    revision: str | None = None
    package: str | None = Field(default=None, description="import name of a package that carries the weights")
    package_subdir: str = "model"
    gguf_file: str | None = Field(
        default=None,
        description=(
            "a GGUF file in the package folder (or, with hf, in that hub repo): read as it is by the llamacpp "
            "backend, converted once to a cached safetensors folder for transformers"
        ),
    )
    gguf_hf: str | None = Field(
        default=None, description="a hub repo that holds gguf_file (for the llamacpp backend when no package has it)"
    )
    gguf_revision: str | None = None
    path: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Source:
        if not (self.hf or self.package or self.path or self.gguf_hf):
            raise ValueError("source needs at least one of: hf, package, path, gguf_hf")
        if self.hf and not (self.revision and _SHA.match(self.revision)):
            raise ValueError(f"source.hf {self.hf!r} needs a pinned revision (a 40-hex commit sha)")
        if self.gguf_hf and not (self.gguf_file and self.gguf_revision and _SHA.match(self.gguf_revision)):
            raise ValueError(f"source.gguf_hf {self.gguf_hf!r} needs gguf_file and a pinned gguf_revision (40-hex)")
        return self


class Architecture(Strict):
    """What the weights are, for listings and for the catalog test that builds a tiny model of the same shape."""

    model_type: str = Field(description="transformers model_type: bert, xlm-roberta, modernbert, llama, clip, ...")
    hidden_size: int = Field(gt=0)
    trust_remote_code: bool = Field(default=False, description="the hub repo ships its own modelling code")
