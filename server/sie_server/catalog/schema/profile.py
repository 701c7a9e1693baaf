"""How a model runs on one kind of device (``profiles.cpu``, ``profiles.cuda``): dtype, batching, backend,
memory and CPU precision."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sie_server.catalog.schema.strict import Strict

#: precisions a CPU profile may allow, tried in the profile's order (see sie_server.adapters.runtime.precision)
CpuPrecision = Literal["int8", "bf16", "fp32"]
#: weight formats the llamacpp backend may try (``gguf_formats``)
GgufFormat = Literal["as_is", "q8_0", "q4_0", "f16"]


class Profile(Strict):
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    max_batch_tokens: int = Field(default=8192, gt=0)
    max_batch_wait_ms: float = Field(default=0.0, ge=0)
    max_padding_ratio: float = Field(
        default=1.25, ge=1.0, description="a batch stops growing when padded tokens would exceed this x real tokens"
    )
    min_batch_tokens: int = Field(default=512, ge=1, description="below this many padded tokens padding is not limited")
    attn: Literal["sdpa", "eager"] = "sdpa"
    backend: Literal["transformers", "sglang", "llamacpp"] = Field(
        default="transformers",
        description=(
            "causal LMs: sglang on CUDA inside the memory budget; llamacpp runs the GGUF file (source.gguf_file) "
            "as it is on CPU, falling back to transformers when the llamacpp extra is not installed"
        ),
    )
    activation_reserve_bytes: int | None = Field(
        default=None,
        ge=0,
        description="bytes held for one full batch; estimated from the model config if unset",
    )
    gguf_formats: list[GgufFormat] = Field(
        default_factory=lambda: list[GgufFormat](["as_is"]),
        min_length=1,
        description="llamacpp: weight formats to try in order (a copy made once by llama.cpp's quantizer); the "
        "first that passes the gate against the file as shipped and runs a RAG-shaped probe faster wins; as_is "
        "(the file as shipped) is the last resort",
    )
    torch_prefill_tokens: int | None = Field(
        default=None,
        ge=1,
        description="llamacpp, Llama architecture: prompts of at least this many tokens are read by torch in "
        "float32 over the GGUF's dequantized weights and their KV cells handed to llama.cpp to decode (a float32 "
        "copy charged to the model); unset: llama.cpp reads every prompt",
    )
    prefix_cache_bytes: int = Field(
        default=128 * 2**20,
        ge=0,
        description="generators: bytes for copies of read prompts' KV cells, so a prompt sharing a prefix "
        "with an earlier one reads only the rest, and on llama.cpp one equal to an earlier one is not read at all "
        "(charged in the memory budget; least recently used evicted; 0 turns it off)",
    )
    cpu_precision: list[CpuPrecision] = Field(
        default_factory=lambda: list[CpuPrecision](["fp32"]),
        min_length=1,
        description="cpu profile: precisions to try in order; the first this CPU supports that passes the "
        "quality gate runs (fp32 is always the last resort)",
    )

    @model_validator(mode="after")
    def _check_precision(self) -> Profile:
        if len(set(self.cpu_precision)) != len(self.cpu_precision):
            raise ValueError(f"cpu_precision lists a precision twice: {self.cpu_precision}")
        if self.cpu_precision != ["fp32"] and self.dtype != "float32":
            raise ValueError("cpu_precision is gated against float32: a profile that sets it keeps dtype: float32")
        return self
