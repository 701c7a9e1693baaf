"""Pydantic schema of one model config (``configs/models/*.yaml``). Unknown keys are refused."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sie_server.catalog.families import CLASSIFIERS, FAMILIES, MEDIA_INPUTS, SCORE_MODES, ExtractKind, extract_kind

_SHA = re.compile(r"^[0-9a-f]{40}$")
_CUSTOM_ADAPTER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
#: precisions a CPU profile may allow, tried in the profile's order (see sie_server.adapters.runtime.precision)
CpuPrecision = Literal["int8", "bf16", "fp32"]
#: the verdict formats of generative guards (one parser module each in sie_server.adapters.guards)
GuardFormat = Literal["qwen3guard", "llama_guard", "granite_guardian"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
    default_instruction: str | None = Field(
        default=None,
        description="the instruction put into instruction_template (embedders: queries only) or prompt_template "
        "(LLM rerankers) when a request gives none",
    )
    # decoder embedders (adapter decoder_embedding): last-token pooling over a trailing EOS
    append_token: str | None = Field(
        default=None,
        description="decoder embedders: a token appended to every text unless the tokenizer already ends it "
        "with that token (the EOS whose hidden state is pooled, e.g. <|endoftext|> or </s>)",
    )
    # LLM rerankers (adapter llm_reranker): relevance from the next-token logits after a prompt
    prompt_template: str = Field(
        default="{query}\n{document}\n{instruction}",
        description="LLM rerankers: one prompt per pair, tokenized as it is (special tokens such as <|im_start|> "
        "written in it are recognised); {instruction}, {query} and {document} are filled in",
    )
    yes_token: str = Field(default="yes", description="LLM rerankers: the word whose logit means relevant")
    no_token: str | None = Field(
        default=None,
        description="LLM rerankers: with it, the score is P(yes) = softmax over the [no, yes] logits; without it, "
        "the yes logit (through `activation`)",
    )
    # ColBERT: marker tokens put after [CLS], query padding with [MASK] to a fixed length, punctuation masking
    query_marker: str | None = None
    doc_marker: str | None = None
    query_max_length: int = Field(default=32, gt=0)
    query_augment: bool = True
    mask_punctuation: bool = True
    # CLIP/SigLIP: SigLIP text towers were trained on text padded to max_sequence_length
    pad_to_max_length: bool = False
    lowercase: bool = Field(default=False, description="texts are lowercased first (SigLIP2 saw lowercased text)")
    # task LoRA adapters (jina-embeddings-v3): a request picks one with params.options.task
    lora_tasks: list[str] = Field(
        default_factory=list,
        description="embedders with task LoRA adapters: their names in the model's own order (its config's "
        "lora_adaptations); the chosen one's index goes to the model as adapter_mask",
    )
    query_lora_task: str | None = Field(default=None, description="the task of a query that names none")
    doc_lora_task: str | None = Field(default=None, description="the task of a document that names none")
    task_prefixes: dict[str, str] = Field(
        default_factory=dict,
        description="the instruction put before a text encoded with that task (a request's own instruction "
        "replaces it); a task not listed has none",
    )
    # sentence-transformers heads after pooling (adapters/runtime/st_modules.py reads them from modules.json)
    dense_heads: list[int] = Field(
        default_factory=list,
        description="embedders: the out_features of each sentence-transformers Dense module that modules.json "
        "lists after pooling, in order (EmbeddingGemma: [3072, 768]); loading refuses a folder whose Dense "
        "modules differ, and the last one is the dense dim",
    )

    @model_validator(mode="after")
    def _check_lora_tasks(self) -> Runtime:
        named = [self.query_lora_task, self.doc_lora_task, *self.task_prefixes]
        unknown = [t for t in named if t is not None and t not in self.lora_tasks]
        if unknown:
            raise ValueError(f"tasks {unknown} are not in runtime.lora_tasks {self.lora_tasks}")
        if len(set(self.lora_tasks)) != len(self.lora_tasks):
            raise ValueError(f"runtime.lora_tasks names a task twice: {self.lora_tasks}")
        return self


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


class Architecture(Strict):
    """What the weights are, for listings and for the catalog test that builds a tiny model of the same shape."""

    model_type: str = Field(description="transformers model_type: bert, xlm-roberta, modernbert, llama, clip, ...")
    hidden_size: int = Field(gt=0)
    trust_remote_code: bool = Field(default=False, description="the hub repo ships its own modelling code")


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
