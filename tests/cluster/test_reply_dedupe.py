"""What a gateway passes on of the replies that reach its inbox (no NATS needed: replies are put where
the inbox subscription puts them): the first answer to a call, once; a second answer (a redelivery,
a resend) is dropped and counted; a streamed answer keeps to one worker's attempt and tells the
worker of any other attempt to stop, and a part lost on the way ends the stream with 503 QUEUE_FULL
instead of a text with a hole."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from sie_server.cluster.gateway import Call, Gateway, GatewaySettings
from sie_server.cluster.streams import Reply, cancel_subject
from sie_server.errors import QueueFull
from tests.helpers.metrics import sample


class Published:
    """Stands in for the gateway's NATS connection: what it publishes, in order."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []

    async def publish(self, subject: str, data: bytes) -> None:
        self.messages.append((subject, data))


def _call(gateway: Gateway) -> Call:
    call = Call(reply_to="_INBOX.test.1", pool="default", priority="interactive")
    gateway.calls[call.reply_to] = call
    return call


def _dropped(gateway: Gateway, reason: str) -> float:
    return sample(gateway.metrics.registry, "sie_gateway_replies_dropped_total", reason=reason, absent_as_zero=True)


def _part(attempt: str, number: int, text: str, *, more: bool = True) -> Reply:
    return Reply(200, {}, text.encode(), more=more, worker="w1", attempt=attempt, part=number)


async def _stream(gateway: Gateway, replies: list[Reply]) -> list[bytes]:
    call = _call(gateway)
    for reply in replies[1:]:
        call.replies.put_nowait(reply)
    return [body async for body in gateway.rest_of_stream(call, replies[0])]


def test_a_second_answer_to_a_call_is_dropped_and_counted() -> None:
    async def scenario() -> tuple[Gateway, Reply, Call]:
        gateway = Gateway(GatewaySettings())
        call = _call(gateway)
        first, second = (Reply(200, {}, body, worker=w, attempt=w) for body, w in ((b"one", "a"), (b"two", "b")))
        await gateway._on_reply(SimpleNamespace(subject=call.reply_to, data=first.pack()))
        answer = await gateway.receive(call)
        await gateway.close(call)
        await gateway._on_reply(SimpleNamespace(subject=call.reply_to, data=second.pack()))  # a redelivery's
        await gateway._on_reply(SimpleNamespace(subject="_INBOX.test.gone", data=second.pack()))  # a call given up
        return gateway, answer, call

    gateway, answer, call = asyncio.run(scenario())
    assert answer.body == b"one" and call.replies.empty()
    assert _dropped(gateway, "duplicate") == 1 and _dropped(gateway, "late") == 1


def test_a_stream_keeps_to_the_attempt_that_answered_first() -> None:
    gateway = Gateway(GatewaySettings())
    replies = [_part("a", 1, "The "), _part("b", 1, "The "), _part("a", 2, "total "), _part("b", 2, "total "),
               _part("a", 3, "is due."), _part("a", 4, "", more=False)]  # fmt: skip
    bodies = asyncio.run(_stream(gateway, replies))
    assert b"".join(bodies) == b"total is due."  # the parts after the first, once each
    assert _dropped(gateway, "duplicate") == 2


def test_a_stream_with_a_lost_part_ends_with_503_not_a_hole() -> None:
    gateway = Gateway(GatewaySettings())
    replies = [_part("a", 1, "The "), _part("a", 2, "total "), _part("a", 4, "due."), _part("a", 5, "", more=False)]
    seen: list[bytes] = []

    async def read() -> None:
        call = _call(gateway)
        for reply in replies[1:]:
            call.replies.put_nowait(reply)
        async for body in gateway.rest_of_stream(call, replies[0]):
            seen.append(body)

    with pytest.raises(QueueFull) as lost:
        asyncio.run(read())
    assert seen == [b"total "] and lost.value.status == 503 and lost.value.retry_after


def test_unnumbered_parts_from_an_older_worker_pass() -> None:
    gateway = Gateway(GatewaySettings())
    replies = [_part("", 0, "a"), _part("", 0, "b"), _part("", 0, "", more=False)]
    assert asyncio.run(_stream(gateway, replies)) == [b"b", b""]


def test_a_second_stream_for_a_call_is_told_to_stop_and_the_first_is_not() -> None:
    gateway = Gateway(GatewaySettings())
    gateway.nc = sent = Published()
    replies = [_part("a", 1, "The "), _part("b", 1, "The "), _part("a", 2, "total "), _part("b", 2, "total "),
               _part("a", 3, "", more=False)]  # fmt: skip
    assert b"".join(asyncio.run(_stream(gateway, replies))) == b"total "
    assert sent.messages == [(cancel_subject("_INBOX.test.1"), b"b")]  # once, naming the other attempt only


def test_a_streamed_part_for_a_call_already_answered_stops_its_worker() -> None:
    async def scenario() -> Published:
        gateway = Gateway(GatewaySettings())
        gateway.nc = sent = Published()
        call = _call(gateway)
        await gateway._on_reply(SimpleNamespace(subject=call.reply_to, data=Reply(200, {}, b"one", attempt="a").pack()))
        await gateway.receive(call)
        await gateway.close(call)
        late = [_part("b", 7, "more"), Reply(200, {}, b"", attempt="b", part=8)]  # the last part needs no cancel
        for reply in late:
            await gateway._on_reply(SimpleNamespace(subject=call.reply_to, data=reply.pack()))
        return sent

    assert asyncio.run(scenario()).messages == [(cancel_subject("_INBOX.test.1"), b"b")]


def test_a_caller_that_leaves_a_stream_stops_every_attempt() -> None:
    async def scenario() -> Published:
        gateway = Gateway(GatewaySettings())
        gateway.nc = sent = Published()
        call = _call(gateway)
        call.replies.put_nowait(_part("a", 2, "total "))
        stream = gateway.rest_of_stream(call, _part("a", 1, "The "))
        assert await anext(stream) == b"total "
        await stream.aclose()  # the caller went away
        return sent

    assert asyncio.run(scenario()).messages == [(cancel_subject("_INBOX.test.1"), b"")]
