"""The rule for parameters on the compatible APIs (OpenAI, Cohere, Jina, TEI, Ollama), whose clients send
fields this server has no use for.

- A field the original client sends and this server does not use (OpenAI's ``user``, Ollama's load-time
  options) is accepted and ignored, and listed in the request's OpenAPI schema: ``x-ignored-parameters``
  and the schema's description name them. Any other unknown field is accepted and ignored too, as the
  original servers do (``additionalProperties: true``).
- A field that asks for something this server cannot do (OpenAI's ``logprobs: true``, Cohere's
  ``max_chunks_per_doc``) is accepted only at the value that asks nothing (``unserved``); any other value is
  a 400 naming the field. It is never dropped in silence.

The native routes refuse unknown fields (``contract/requests.py``'s ``Wire``: ``extra="forbid"``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict

IGNORED_KEY = "x-ignored-parameters"


def list_ignored(schema: dict[str, Any], cls: type[Any]) -> None:
    """The OpenAPI schema of a compatible request names the fields it accepts and ignores."""
    ignored = list(getattr(cls, "IGNORED", ()))
    schema[IGNORED_KEY] = ignored
    schema["additionalProperties"] = True
    named = f" ({', '.join(ignored)})" if ignored else ""
    note = (
        f"Fields the original clients send that this server does not use{named} are accepted and ignored, "
        "as are unknown fields; a field asking for what this server cannot do is a 400 naming it."
    )
    schema["description"] = f"{schema.get('description', '').strip()}\n\n{note}".strip()


class Compatible(BaseModel):
    """A compatible API's request: the fields it reads are typed strictly; ``IGNORED`` names the fields its
    clients send that are accepted and ignored (listed in the OpenAPI spec); other unknown fields pass."""

    model_config = ConfigDict(extra="ignore", strict=True, json_schema_extra=list_ignored)
    IGNORED: ClassVar[tuple[str, ...]] = ()


def unserved(why: str, *asks_nothing: object) -> AfterValidator:
    """A field accepted only unset or at a value in ``asks_nothing``; any other value is refused with ``why``
    (pydantic puts the field's name in front: ``logprobs: Value error, ...``)."""

    def check(value: object) -> object:
        if value is not None and not any(value == v and type(value) is type(v) for v in asks_nothing):
            raise ValueError(f"{value!r} is not served: {why}")
        return value

    return AfterValidator(check)
