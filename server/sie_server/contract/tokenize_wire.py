"""Wire models of ``POST /v1/tokenize/{model}`` and ``POST /v1/detokenize/{model}``: a model's own text
tokenizer, the whole text (no cut at the model's limit). TEI's ``/tokenize`` and ``/decode``
(``api/routes/tei_tokens.py``) translate onto them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictBool

from sie_server.catalog.schema import ModelConfig
from sie_server.contract.requests import Whole, Wire
from sie_server.contract.wire import KeepNone
from sie_server.errors import InvalidInput

TokenId = Annotated[Whole, Field(ge=0, le=2**32 - 1)]


def no_tokenizer(model: ModelConfig) -> InvalidInput:
    """The refusal for a model that exposes no text tokenizer (OCR, document parsers, speech, GLiNER)."""
    return InvalidInput(
        f"model {model.id} exposes no text tokenizer (its adapter is {model.adapter}, it takes "
        f"{', '.join(model.inputs)}): tokenize and detokenize serve the models that read text with one"
    )


def check_reads_text(model: ModelConfig) -> None:
    """Refused before any load: a model that takes no text has no text tokenizer."""
    if "text" not in model.inputs:
        raise no_tokenizer(model)


class TextIn(Wire):
    text: str


class TokenizeRequest(Wire):
    items: list[TextIn] = Field(min_length=1, description="the texts to tokenize, each whole")
    add_special_tokens: StrictBool = Field(
        default=True, description="add the tokens the model's tokenizer adds around a text ([CLS], a BOS)"
    )


class Token(KeepNone):
    id: int
    text: str = Field(description="the text's characters start to stop; a special token's own string")
    special: bool = Field(description="added by the tokenizer (add_special_tokens), not read from the text")
    start: int | None = Field(description="character offset into the item's text; null for a special token")
    stop: int | None = Field(description="character offset just past the token; null for a special token")


class TokenizedItem(KeepNone):
    tokens: list[Token]


class TokenizeResponse(KeepNone):
    model: str
    items: list[TokenizedItem] = Field(description="one per item, in order")


class IdsIn(Wire):
    ids: list[TokenId] = Field(min_length=1, description="token ids, each below the model's vocabulary size")


class DetokenizeRequest(Wire):
    items: list[IdsIn] = Field(min_length=1)
    skip_special_tokens: StrictBool = Field(default=True, description="leave special tokens out of the text")


class DetokenizedItem(KeepNone):
    text: str


class DetokenizeResponse(KeepNone):
    model: str
    items: list[DetokenizedItem] = Field(description="one per item, in order")
