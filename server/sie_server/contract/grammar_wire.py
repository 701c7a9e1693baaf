"""Wire models of constrained generation: the native ``grammar`` of ``/v1/generate`` (SIE 0.10.1's
fields: exactly one of ``json_schema``, ``regex``, ``ebnf``; ``label`` and ``strict``) and OpenAI's
``response_format`` (``text``, ``json_object``, ``json_schema``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

MAX_GRAMMAR_CHARS = 100_000  # a regex or an EBNF grammar; a schema is bounded by the body limit


class GrammarIn(BaseModel):
    """What the output must match: a JSON schema (the output is JSON valid under it), a regex (the
    whole output matches it) or an EBNF grammar (Lark syntax with ``start:``, or llama.cpp's GBNF
    with ``root ::=``). ``strict`` (JSON schema only, default true): a keyword the engine does not
    support is a 400; false lets it pass, unenforced."""

    model_config = ConfigDict(extra="forbid", strict=True)

    json_schema: dict[str, Any] | None = None
    regex: str | None = Field(default=None, min_length=1, max_length=MAX_GRAMMAR_CHARS)
    ebnf: str | None = Field(default=None, min_length=1, max_length=MAX_GRAMMAR_CHARS)
    label: str | None = Field(default=None, max_length=256, description="a name for logs; not used otherwise")
    strict: StrictBool | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> GrammarIn:
        given = [name for name in ("json_schema", "regex", "ebnf") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"grammar takes exactly one of json_schema, regex or ebnf (got {given or 'none'})")
        return self


class JsonSchemaFormat(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, populate_by_name=True)

    name: str = Field(default="response", max_length=64)
    description: str | None = None
    schema_: dict[str, Any] = Field(default_factory=dict, alias="schema")
    strict: StrictBool | None = None


class ResponseFormat(BaseModel):
    """OpenAI's ``response_format``: ``text`` (free), ``json_object`` (any JSON object), or ``json_schema``."""

    model_config = ConfigDict(extra="ignore", strict=True)

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("response_format of type json_schema needs json_schema: {name, schema}")
        return self

    def grammar(self) -> GrammarIn | None:
        """The same constraint as the native route's grammar (None: free text)."""
        if self.type == "text":
            return None
        if self.type == "json_object":
            return GrammarIn(json_schema={"type": "object"})
        assert self.json_schema is not None
        # OpenAI's strict: false means "best effort": unsupported keywords pass unenforced
        return GrammarIn(json_schema=self.json_schema.schema_, strict=self.json_schema.strict is not False)
