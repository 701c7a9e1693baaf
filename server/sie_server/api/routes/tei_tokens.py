"""TEI's ``POST /tokenize`` and ``POST /decode``, thin translations onto the native tokenize and
detokenize calls (``/v1/tokenize``, ``/v1/detokenize``), in TEI's shapes (its router's
``into_tokens``): ``[[{id, text, special, start, stop}]]`` per input, where a special token has its
own string as ``text`` and null offsets, and any other has ``start`` / ``stop`` as UTF-8 byte offsets
into the input (the native answer's are character offsets) and that slice of it as ``text``. The
whole input is tokenized, as TEI's /tokenize does (no cut at the model's limit).

``prompt_name`` prepends the model's prefix for that role (``query``: its query prefix; unset or
``document`` / ``passage``: its document prefix), as ``/embed`` applies it, and the offsets count in
the prompted text, as TEI's do. The model is chosen as on TEI's other routes (``tei.py``).
"""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.body import json_response, parse
from sie_server.api.context import call, service
from sie_server.api.deadlines import within
from sie_server.api.routes.tei import max_body, tei_doc
from sie_server.api.routes.tei_serving import is_query, model_id_of, texts_of
from sie_server.api.routes.tokenize import check_id_counts, tokenizer_model
from sie_server.contract.tei_wire import (
    DecodeRequest,
    DecodeResponse,
    EmptyBatch,
    SimpleToken,
    TeiTokenizeRequest,
    TeiTokenizeResponse,
)
from sie_server.contract.tokenize_wire import DetokenizeRequest, IdsIn, TextIn, Token, TokenizeRequest

router = APIRouter(tags=["TEI"])


def utf8_offsets(text: str) -> np.ndarray:
    """The UTF-8 byte offset of each character of ``text``, and of its end (``len(text) + 1`` values)."""
    points = np.frombuffer(text.encode("utf-32-le", errors="surrogatepass"), dtype="<u4")
    widths = 1 + (points >= 0x80).astype(np.int64) + (points >= 0x800) + (points >= 0x10000)
    return np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(widths)])


def _tei_tokens(text: str, tokens: list[Token]) -> list[SimpleToken]:
    at = utf8_offsets(text)
    return [
        SimpleToken(id=t.id, text=t.text, special=True, start=None, stop=None)
        if t.special or t.start is None or t.stop is None
        else SimpleToken(id=t.id, text=t.text, special=False, start=int(at[t.start]), stop=int(at[t.stop]))
        for t in tokens
    ]


@router.post("/tokenize", **tei_doc(TeiTokenizeResponse, TeiTokenizeRequest))
async def tokenize(request: Request) -> Response:
    """Each input's tokens (``[[{id, text, special, start, stop}]]``; offsets in bytes, TEI's)."""
    body = await parse(request, TeiTokenizeRequest, max_body(request))
    config = tokenizer_model(request, model_id_of(request, body.model), "tokenize")
    svc = service(request)
    texts = texts_of(body.inputs)
    if any(not text for text in texts):
        raise EmptyBatch("`inputs` cannot be empty")
    runtime = config.runtime
    prefix = runtime.query_prefix if is_query(body.prompt_name) else runtime.doc_prefix
    prompted = [prefix + text for text in texts]
    svc.limits.texts(prompted, "inputs")
    native = TokenizeRequest(items=[TextIn(text=t) for t in prompted], add_special_tokens=body.add_special_tokens)
    options = call(request)
    async with within(options):
        answer = await svc.tokenize(config, native, options)
    tokens = [_tei_tokens(t, item.tokens) for t, item in zip(prompted, answer.items, strict=True)]
    return json_response(TeiTokenizeResponse(tokens))


@router.post("/decode", **tei_doc(DecodeResponse, DecodeRequest))
async def decode(request: Request) -> Response:
    """Each list of ids as text (``ids``: one list, or a list of lists; one text per list)."""
    body = await parse(request, DecodeRequest, max_body(request))
    config = tokenizer_model(request, model_id_of(request, body.model), "detokenize")
    svc = service(request)
    rows = [row for row in body.ids if isinstance(row, list)]  # a list of lists, or else one list
    if len(rows) != len(body.ids):
        rows = [[i for i in body.ids if isinstance(i, int)]]
    if not rows or any(not row for row in rows):
        raise EmptyBatch("`input_ids` cannot be empty")
    native = DetokenizeRequest(items=[IdsIn(ids=row) for row in rows], skip_special_tokens=body.skip_special_tokens)
    svc.limits.count(len(native.items))
    check_id_counts(native, svc.limits.max_text_bytes)
    options = call(request)
    async with within(options):
        answer = await svc.detokenize(config, native, options)
    return json_response(DecodeResponse([item.text for item in answer.items]))
