"""OpenTelemetry traces, on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set and off (and free) otherwise.

Spans: each HTTP request (a server span, continuing the caller's W3C ``traceparent``); under it a
``queue wait`` span per batch its items waited for; each batch a ``batch`` span linked to the
request spans of its items, with an ``inference`` span under it for the forward pass. A generation
(its sequence decoded step by step beside others) gets a ``queue wait`` span until it joined the
running batch and a ``decode`` span from then to its last token, under its request. The gateway
puts ``traceparent`` in its work messages, so a worker's request span continues the gateway's.

Nothing here imports opentelemetry until ``setup`` turns tracing on: off, each hook is one check
of a module global. ``setup`` takes an exporter (the tests' in-memory one); without one it exports
over OTLP/HTTP to the endpoint (the usual ``OTEL_EXPORTER_OTLP_*`` variables apply), or prints
spans to stdout when ``OTEL_TRACES_EXPORTER=console``. opentelemetry comes with the ``otel`` extra.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from sie_server.contract import headers as h

ENDPOINT_VARIABLE = "OTEL_EXPORTER_OTLP_ENDPOINT"
_CARRIED = (h.TRACEPARENT.encode(), h.TRACESTATE.encode())

_tracer: Any = None  # an opentelemetry Tracer while tracing is on
_provider: Any = None


def enabled() -> bool:
    return _tracer is not None


def setup(service_name: str, environ: Mapping[str, str] | None = None, exporter: Any = None) -> bool:
    """Turn tracing on for this process as ``service_name`` (sie-server, sie-gateway) when the
    endpoint variable is set or ``exporter`` is given; whether it is on."""
    global _tracer, _provider
    env = os.environ if environ is None else environ
    if exporter is None and not env.get(ENDPOINT_VARIABLE):
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:
        raise ValueError(f"{ENDPOINT_VARIABLE} is set but opentelemetry is not installed (pip install "
                         f"'sie-oss[otel]'): {exc}") from None  # fmt: skip
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=_one_line)))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _provider, _tracer = provider, provider.get_tracer("sie_server")
    return True


def shutdown() -> None:
    """Flush and turn tracing off."""
    global _tracer, _provider
    if _provider is not None:
        _provider.shutdown()
    _tracer = _provider = None


def _one_line(span: Any) -> str:
    return str(span.to_json(indent=None)) + os.linesep


def _wall_ns(monotonic_s: float) -> int:
    """A ``time.monotonic()`` instant as the epoch nanoseconds spans are stamped with."""
    return time.time_ns() - int((time.monotonic() - monotonic_s) * 1e9)


@contextlib.contextmanager
def request_span(method: str, path: str, headers: Iterable[tuple[bytes, bytes]], request_id: str) -> Iterator[Any]:
    """The span of one HTTP request, current while it is handled; continues a ``traceparent`` header."""
    from opentelemetry.propagate import extract
    from opentelemetry.trace import SpanKind

    carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers if k in _CARRIED}
    attributes = {"http.request.method": method, "url.path": path, "sie.request_id": request_id}
    with _tracer.start_as_current_span(
        f"{method} {path}", context=extract(carrier), kind=SpanKind.SERVER, attributes=attributes
    ) as span:
        yield span


def set_status(span: Any, status: int, model: str | None) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("http.response.status_code", status)
    if model:
        span.set_attribute("sie.model", model)
    if status >= 500:
        span.set_status(Status(StatusCode.ERROR))


def inject(carrier: MutableMapping[str, str]) -> None:
    """The current span's ``traceparent`` (and ``tracestate``) into message headers; nothing when off."""
    if _tracer is None:
        return
    from opentelemetry.propagate import inject as otel_inject

    otel_inject(carrier)


def current() -> Any:
    """The current span's context, for work handed to another task or thread; None when off."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return context if context.is_valid else None


def current_trace_id() -> str | None:
    context = current()
    return None if context is None else f"{context.trace_id:032x}"


@contextlib.contextmanager
def batch_span(model_id: str, task: str, items: Iterable[tuple[Any, float]]) -> Iterator[None]:
    """A batch's span, linked to its requests' spans, with each request's ``queue wait`` span
    (from its first item's arrival to now) under that request. ``items``: (span context, enqueued
    at, monotonic) per item. Nothing when off or when no item was traced."""
    if _tracer is None:
        yield
        return
    waited: dict[tuple[int, int], tuple[Any, float]] = {}  # a request's span -> (its context, first arrival)
    for context, enqueued_at in items:
        if context is not None:
            key = (context.trace_id, context.span_id)
            waited[key] = (context, min(enqueued_at, waited.get(key, (context, enqueued_at))[1]))
    if not waited:
        yield
        return
    from opentelemetry import trace

    now = time.time_ns()
    for context, enqueued_at in waited.values():
        parent = trace.set_span_in_context(trace.NonRecordingSpan(context))
        wait = _tracer.start_span("queue wait", context=parent, start_time=_wall_ns(enqueued_at))
        wait.set_attribute("sie.model", model_id)
        wait.end(end_time=now)
    links = [trace.Link(context) for context, _ in waited.values()]
    attributes = {"sie.model": model_id, "sie.task": task, "sie.batch.requests": len(waited)}
    with _tracer.start_as_current_span("batch", context=trace.set_span_in_context(trace.INVALID_SPAN),
                                       links=links, attributes=attributes, start_time=now):  # fmt: skip
        yield


@contextlib.contextmanager
def inference_span(size: int) -> Iterator[None]:
    """The forward pass of a batch (under the current ``batch`` span); nothing when off."""
    if _tracer is None:
        yield
        return
    with _tracer.start_as_current_span("inference", attributes={"sie.batch.items": size}):
        yield


def generation_spans(context: Any, model_id: str, queued_at: float, admitted_at: float | None, tokens: int) -> None:
    """A finished generation's ``queue wait`` (queued to admitted) and ``decode`` (admitted to now)
    spans under its request's span (``context``); monotonic instants. Nothing when off or untraced."""
    if _tracer is None or context is None:
        return
    from opentelemetry import trace

    parent = trace.set_span_in_context(trace.NonRecordingSpan(context))
    now, admitted = time.time_ns(), _wall_ns(admitted_at if admitted_at is not None else time.monotonic())
    wait = _tracer.start_span("queue wait", context=parent, start_time=_wall_ns(queued_at))
    wait.set_attribute("sie.model", model_id)
    wait.end(end_time=admitted)
    decode = _tracer.start_span("decode", context=parent, start_time=admitted)
    decode.set_attribute("sie.model", model_id)
    decode.set_attribute("sie.completion_tokens", tokens)
    decode.end(end_time=now)
