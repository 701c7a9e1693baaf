"""Extract on a text classifier: each item's labels best first, or that item's own error.

The items' texts become rows (``TextClassifier.rows``: one per (text, label) pair for NLI, one per
text otherwise) queued together on the shared scheduler, so a request's rows are batched with each
other and with other callers' rows for the same model and options. An empty text is that item's
``error`` (invalid_input) and its neighbours are answered; so is an item whose rows failed or ran
past ``X-SIE-Timeout-Ms`` (``queue.run``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.classify import Classified, TextClassifier
from sie_server.adapters.runtime.media import Found, MediaLabel
from sie_server.adapters.runtime.options import ClassifyOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import ExtractRequest
from sie_server.engine.extract.protocol import ExtractEngine, Outcome, PerItem
from sie_server.engine.extract.queue import Tokenizing, adapter_of, run, tokenize
from sie_server.engine.outcomes import Timing
from sie_server.errors import InvalidInput, SIEError

Labelled = Classified | SIEError


def options_of(request: ExtractRequest) -> ClassifyOptions:
    params = request.params
    if params is not None and params.schema_ is not None:
        raise InvalidInput("params.schema is for GLiNER2 models; a classifier takes params.labels")
    return ClassifyOptions.of(
        params.labels if params else None,
        params.threshold if params else None,
        params.options if params else None,
    )


async def classify_texts(
    service: Tokenizing,
    model: ModelConfig,
    texts: list[str],
    options: ClassifyOptions,
    call: CallOptions,
    timing: Timing,
) -> tuple[list[Labelled], list[int]]:
    """Each text's labels, or its own error, and the tokens its rows ran; a request the model cannot
    serve at all raises InvalidInput."""
    adapter = await adapter_of(service, model, call, (TextClassifier,), "classify texts")
    adapter.check(options)
    outcomes: list[Labelled | None] = [None] * len(texts)
    good: list[int] = []
    for k, text in enumerate(texts):
        if text.strip():
            good.append(k)
        else:
            outcomes[k] = InvalidInput(f"items[{k}].text is empty: there is nothing to classify")
    rows = await tokenize(service, timing, lambda ts: adapter.rows(ts, options), [texts[k] for k in good], split=False)
    results = await run(service, model, rows, options, call, timing, each=True)
    per_text: dict[int, list[tuple[Tokens, object]]] = {k: [] for k in range(len(good))}
    tokens = [0] * len(texts)
    for row, result in zip(rows, results, strict=True):
        per_text[row.data.text].append((row, result))
        tokens[good[row.data.text]] += row.length
    for position, pairs in per_text.items():
        failed = next((r for _, r in pairs if isinstance(r, SIEError)), None)
        outcomes[good[position]] = failed or adapter.combine([t for t, _ in pairs], [r for _, r in pairs], options)
    return [o if o is not None else InvalidInput("no answer") for o in outcomes], tokens


def _found(outcome: Labelled, tokens: int) -> Outcome:
    if isinstance(outcome, SIEError):
        return outcome
    labels = [MediaLabel(label=label["label"], score=label["score"]) for label in outcome.labels]
    return Found(classifications=labels, data={"scores": outcome.scores, "tokens": tokens})


@dataclass(frozen=True)
class ClassifyRequest:
    ids: list[str]
    texts: list[str]
    options: ClassifyOptions


class Classification(PerItem[ClassifyRequest]):
    """The classification kind: ``classifications`` best first, ``data.scores`` every label's score in the
    model's (or the request's) label order and ``data.tokens`` the tokens it ran, or the item's ``error``."""

    def decode(self, model: ModelConfig, request: ExtractRequest) -> ClassifyRequest:
        ids = [item.id_at(k) for k, item in enumerate(request.items)]
        texts = [item.text or "" for item in request.items]
        return ClassifyRequest(ids, texts, options_of(request))

    async def queue(
        self, engine: ExtractEngine, model: ModelConfig, decoded: ClassifyRequest, call: CallOptions, timing: Timing
    ) -> list[Outcome]:
        outcomes, tokens = await classify_texts(engine.inference, model, decoded.texts, decoded.options, call, timing)
        return [_found(o, n) for o, n in zip(outcomes, tokens, strict=True)]


HANDLER = Classification()
