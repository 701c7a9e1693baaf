"""What a model serves (``tasks``): encode outputs and their dims, score mode, extract and generate options."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sie_server.catalog.schema.strict import Strict

#: the verdict formats of generative guards (one parser module each in sie_server.adapters.guards)
GuardFormat = Literal["qwen3guard", "llama_guard", "granite_guardian"]


class DenseSpec(Strict):
    dim: int = Field(gt=0)
    matryoshka_dims: list[int] | None = Field(
        default=None,
        description="smaller dims the model was trained to serve (Matryoshka): a request may ask for any of them",
    )

    @model_validator(mode="after")
    def _matryoshka(self) -> DenseSpec:
        dims = self.matryoshka_dims
        if dims is not None:
            bad = [d for d in dims if not 0 < d <= self.dim]
            if bad or not dims or len(set(dims)) != len(dims):
                raise ValueError(f"matryoshka_dims must be distinct dims from 1 to dim ({self.dim}); got {dims}")
        return self

    def allowed_dims(self) -> list[int]:
        """The dims a request may ask for, largest first: the full dim and the Matryoshka ones."""
        return sorted({self.dim, *(self.matryoshka_dims or [])}, reverse=True)


class SparseSpec(Strict):
    dim: int = Field(gt=0)


class MultivectorSpec(Strict):
    dim: int = Field(gt=0)


class MuveraSpec(Strict):
    """MUVERA fixed-size vectors from a multivector (``engine/muvera.py``): dim = repetitions * 2**k_sim * d_proj
    (the defaults: 16 * 16 * 8 = 2048)."""

    repetitions: int = Field(default=16, ge=1, le=64, description="independent SimHash partitions, concatenated")
    k_sim: int = Field(default=4, ge=0, le=10, description="SimHash hyperplanes: 2**k_sim buckets per repetition")
    d_proj: int = Field(default=8, ge=1, description="each bucket's block: tokens projected to d_proj (+-1 matrix)")
    seed: int = Field(default=42, ge=0, lt=2**63, description="every random matrix comes from this seed")

    @property
    def dim(self) -> int:
        return self.repetitions * (1 << self.k_sim) * self.d_proj


class EncodeTask(Strict):
    dense: DenseSpec | None = None
    sparse: SparseSpec | None = None
    multivector: MultivectorSpec | None = None
    muvera: MuveraSpec | None = Field(
        default=None,
        description="multivector models: the MUVERA encoding's parameters (every multivector model offers "
        "output type muvera, with the defaults when this is unset)",
    )

    @model_validator(mode="after")
    def _check_muvera(self) -> EncodeTask:
        if self.muvera is not None:
            if self.multivector is None:
                raise ValueError("tasks.encode.muvera is computed from a multivector: declare tasks.encode.multivector")
            d_proj, dim = self.muvera.d_proj, self.multivector.dim
            if d_proj > dim:
                raise ValueError(f"tasks.encode.muvera.d_proj {d_proj} exceeds the multivector dim {dim}")
        return self

    def output_types(self) -> list[str]:
        """What the model's forward pass computes."""
        return [name for name in ("dense", "sparse", "multivector") if getattr(self, name) is not None]

    def muvera_spec(self) -> MuveraSpec | None:
        """The MUVERA parameters of a multivector model (the declared ones or the defaults); None without one."""
        if self.multivector is None:
            return None
        return self.muvera or MuveraSpec(d_proj=min(MuveraSpec().d_proj, self.multivector.dim))

    def served_outputs(self) -> list[str]:
        """The output types a request may ask for: the computed ones, and muvera for multivector models."""
        return [*self.output_types(), *(["muvera"] if self.multivector is not None else [])]

    def dims(self) -> dict[str, int]:
        """Each served output's dimension (a multivector's: per token; sparse: the vocabulary)."""
        dims = {name: getattr(self, name).dim for name in self.output_types()}
        spec = self.muvera_spec()
        if spec is not None:
            dims["muvera"] = spec.dim
        return dims


class ScoreTask(Strict):
    mode: Literal["cross_encoder", "bi_encoder", "maxsim", "sparse_dot"]


class ExtractTask(Strict):
    max_labels: int = Field(default=25, gt=0, description="labels one request may ask for")
    threshold: float = Field(default=0.5, ge=0, le=1, description="default minimum span score")
    options: dict[str, float | int | str | bool] = Field(
        default_factory=dict,
        description="defaults of params.options for this model (a detector's box_threshold and text_threshold, "
        "Florence-2's task); a request's own options replace them one by one",
    )
    ocr_model: str | None = Field(
        default=None,
        description="document parsers: the catalog id of the OCR model that reads pages without a text layer",
    )
    render_dpi: int = Field(default=200, ge=36, le=600, description="pages rendered for OCR: dots per inch")
    table_structure: bool = Field(
        default=False,
        description="document parsers with a layout model: docling's TableFormer reads each table's rows, columns "
        "and cells (needs docling-ibm-models); without it a table region keeps no text",
    )
    safe_labels: list[str] = Field(
        default_factory=list,
        description="classifiers: the labels that mean nothing was found (a moderation model's OK, BENIGN): "
        "/v1/moderations never flags them; the others are flagged at or above threshold",
    )
    guard: GuardFormat | None = Field(
        default=None,
        description="causal LMs: extract runs the model as a generative guard (its own moderation chat template, "
        "greedy decoding) and reads its verdict in this format (adapters/guards/<format>.py)",
    )


#: how tools are offered to a model and its calls read (sie_server/tool_formats/<name>.py)
ToolFormatName = Literal["generic", "qwen", "llama3", "phi4", "gemma3", "smollm3"]


class GenerateTask(Strict):
    chat: bool = Field(default=True, description="messages are rendered with the tokenizer's chat template")
    tool_format: ToolFormatName | None = Field(
        default=None,
        description="the model's tool-calling format; unset: detected from its chat template (generic if none fits)",
    )


class Tasks(Strict):
    encode: EncodeTask | None = None
    score: ScoreTask | None = None
    extract: ExtractTask | None = None
    generate: GenerateTask | None = None

    def names(self) -> list[str]:
        return [name for name in ("encode", "score", "extract", "generate") if getattr(self, name) is not None]
