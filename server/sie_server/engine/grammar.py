"""Constrained decoding: a request's grammar (a JSON schema, a regex, an EBNF grammar, or any JSON
object) as a token mask per step, from llguidance.

llguidance is the engine because it installs alone (a Rust extension with no torch, triton or CUDA
wheels: xgrammar 0.2.8 pulls triton and apache-tvm-ffi onto a CPU machine), takes every format the
wire has (JSON schema, regex, Lark-style EBNF and llama.cpp's GBNF), works from both backends'
vocabularies (a Hugging Face fast tokenizer, a GGUF's own), and computes a row's mask in Rust without
the GIL. ``benchmarks/constrained.py`` measures what it costs a decode step.

Each constrained sequence holds its own matcher; the sampler masks that row's logits with it, and the
loop feeds it every token the row takes (``engine/decode_loop.py``). Free rows of the same batch are
not touched. A grammar that does not compile, a regex that does not parse or a schema keyword the
engine does not support is an ``InvalidInput`` (400) naming the problem, raised before the sequence
joins the batch, so it fails only its own request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from sie_server.contract.grammar_wire import GrammarIn
from sie_server.errors import InferenceError, InvalidInput

GrammarKind = Literal["json_schema", "regex", "ebnf", "json_object"]
#: how JSON output is laid out: compact separators, no free whitespace, so a grammar ends where its value does
JSON_OPTIONS = {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False}
ANY_JSON_OBJECT = {"type": "object"}
DESCRIPTIONS = {"json_schema": "JSON schema", "regex": "regex", "ebnf": "EBNF grammar", "json_object": "JSON"}


@dataclass(frozen=True, slots=True)
class GrammarSpec:
    """What a request constrains its output to: the kind and its source (a schema as compact JSON)."""

    kind: GrammarKind
    source: str
    #: JSON schema only: False lets the schema's unsupported keywords pass as warnings (OpenAI's strict: false)
    strict: bool = True

    @classmethod
    def json_schema(cls, schema: dict[str, Any], *, strict: bool = True) -> GrammarSpec:
        # keys keep the caller's order: properties are generated in the order the schema lists them
        return cls("json_schema", json.dumps(schema, separators=(",", ":")), strict)

    @classmethod
    def of(cls, grammar: GrammarIn) -> GrammarSpec:
        """The wire's grammar (exactly one of its three kinds is set)."""
        if grammar.json_schema is not None:
            return cls.json_schema(grammar.json_schema, strict=grammar.strict is not False)
        if grammar.regex is not None:
            return cls("regex", grammar.regex)
        assert grammar.ebnf is not None
        return cls("ebnf", grammar.ebnf)

    def describe(self) -> str:
        return DESCRIPTIONS[self.kind]


def grammar_source(spec: GrammarSpec) -> str:
    """The llguidance grammar for ``spec``; InvalidInput for a source that is not even well formed."""
    import llguidance

    if spec.kind == "regex":
        return str(llguidance.LLMatcher.grammar_from_regex(spec.source))
    if spec.kind == "ebnf":
        from llguidance.gbnf_to_lark import any_to_lark

        try:  # llama.cpp's GBNF (`root ::= ...`) is translated to the Lark form (`start: ...`)
            lark = any_to_lark(spec.source)
        except Exception as exc:
            raise InvalidInput(f"grammar.ebnf does not parse: {exc}") from None
        return str(llguidance.LLMatcher.grammar_from_lark(lark))
    schema = ANY_JSON_OBJECT if spec.kind == "json_object" else json.loads(spec.source)
    options: dict[str, Any] = {**JSON_OPTIONS, "lenient": not spec.strict}
    try:
        return str(llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=options))  # type: ignore[arg-type]
    except ValueError as exc:
        raise InvalidInput(f"grammar.json_schema is not a JSON schema object: {exc}") from None


def check_grammar(spec: GrammarSpec, tokenizer: Any) -> str:
    """The compiled grammar, or InvalidInput naming what the engine refused (an unsupported keyword,
    a regex that does not parse, an EBNF rule that is not defined)."""
    import llguidance

    grammar = grammar_source(spec)
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, tokenizer)
    if is_error:
        raise InvalidInput(f"the {spec.describe()} cannot be used: {_first_line(messages)}")
    return grammar


def _first_line(messages: list[str]) -> str:
    text = messages[0] if messages else "rejected by the grammar engine"
    return text.strip().splitlines()[0][:500] if text.strip() else "rejected by the grammar engine"


class Constraint:
    """One sequence's grammar state: the mask of tokens it may take next, advanced by each token it takes."""

    def __init__(self, tokenizer: Any, grammar: str, vocab_size: int):
        import llguidance

        self.matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if self.matcher.is_error():
            raise InvalidInput(f"the grammar cannot be used: {self.matcher.get_error()}")
        self.vocab_size = vocab_size
        self._words = (vocab_size + 31) // 32

    def allowed(self) -> np.ndarray:
        """A bool per token of the vocabulary: may this row take it next."""
        bitmask = np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8)
        if self.matcher.is_error():
            raise InferenceError(f"the grammar engine failed: {self.matcher.get_error()}")
        bits = np.unpackbits(bitmask, bitorder="little")
        allowed = np.zeros(self.vocab_size, dtype=bool)
        count = min(self.vocab_size, bits.shape[0])
        allowed[:count] = bits[:count].astype(bool)
        return allowed

    def take(self, token: int) -> None:
        """Advance by the token the row took (always one the mask allowed)."""
        if not self.matcher.consume_token(token):
            raise InferenceError(f"the grammar engine refused token {token}: {self.matcher.get_error()}")

    @property
    def finished(self) -> bool:
        """The grammar is complete and allows nothing more (only the end of the sequence)."""
        return bool(self.matcher.is_stopped())

    @property
    def accepting(self) -> bool:
        """What was generated so far is a complete sentence of the grammar."""
        return bool(self.matcher.is_accepting())


def mask_logits(logits: np.ndarray, allowed: np.ndarray) -> None:
    """Tokens not allowed get -inf, in place (``logits`` may be wider than the tokenizer's vocabulary)."""
    width = logits.shape[-1]
    keep = np.zeros(width, dtype=bool)
    n = min(width, allowed.shape[0])
    keep[:n] = allowed[:n]
    logits[~keep] = -np.inf
