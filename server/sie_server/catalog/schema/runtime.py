"""How a model's inputs are prepared and its outputs read (``runtime``): pooling, prefixes, prompts, markers,
LoRA tasks and heads."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sie_server.catalog.schema.strict import Strict


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
