"""The gateway's NATS side: publishing work messages, collecting replies, tracking workers.

The HTTP side is the single server's API over ``cluster/gateway_service.py`` (built in ``cluster/gateway_app.py``).

Each request becomes work messages on its model's pool stream for its priority class;
replies come back on the gateway's inbox. Bodies too large for one message go by
reference through the payload object store. When some live workers of the pool hold the
model and others do not, the work goes to the least busy holder's own subject (and back
to the shared one if that worker stops heartbeating before it answers). The gateway holds
no model, and exports the pending work per stream as a metric to scale on.

Across a lost NATS connection: a call waiting for its answer fails with 503 QUEUE_FULL and
Retry-After once the connection has been away for ``RECONNECT_GRACE_S``; when it comes back
sooner, each call still unanswered watches its work message, and if a worker took it (it is
gone from the stream) but the answer was lost with the connection, first asks the pool's workers
whether one of them still has the answer (a worker remembers its recent answers and sends it
again, or has the call in hand) and sends the work again only when none does, so the work does
not run twice. The first answer to a call wins; any later one (a redelivery, a resend) is dropped
and counted, and a second streamed answer's worker is told to stop (a cancel naming its attempt).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from sie_server.cluster import nats_connection, pool_gauges, streams
from sie_server.cluster.gateway_metrics import GatewayMetrics
from sie_server.cluster.gateway_settings import GatewaySettings as GatewaySettings  # re-exported
from sie_server.cluster.gateway_workers import WorkerSeen
from sie_server.cluster.streams import Reply
from sie_server.contract import headers as h
from sie_server.contract.headers import PRIORITIES
from sie_server.errors import InferenceError, QueueFull
from sie_server.observability import tracing
from sie_server.observability.logging import current_request_id

log = logging.getLogger(__name__)
SPLIT_TASKS = ("encode", "extract")
WORKER_TTL_S = 6.0
PUBLISH_TRIES = 3
PUBLISH_TIMEOUT_S = 2.0  # per try; a retry carries the same message id, so JetStream keeps one copy
BUSY_INFLIGHT = 192  # a holder with this much work in hand is not preferred
RECONNECT_GRACE_S = 10.0  # calls waiting while NATS is away this long fail with 503 + Retry-After
REPLY_GRACE_S = 2.0  # taken work whose answer has not come this long after is sent again
RECENT_ANSWERS = 65536  # answered calls remembered, to tell a duplicate answer from a late one
ASK_TIMEOUT_S = 1.0  # how long the pool's workers have to say one of them has a lost answer


@dataclass
class Call:
    """One work message in flight: what was published, the replies received, its stored body."""

    reply_to: str
    pool: str
    priority: str
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    target: str = ""  # the worker it was sent to, if it went to one worker
    replies: asyncio.Queue[Reply] = field(default_factory=asyncio.Queue)
    body_ref: str = ""
    msg_id: str = ""  # the last published work message: its id and stream sequence
    seq: int = 0
    answered: bool = False  # a reply has arrived
    in_doubt: bool = False  # unanswered across a lost connection: its answer may have been lost
    gone_since: float | None = None  # in doubt, and its work message was seen taken at this time
    sent_at: float = field(default_factory=time.monotonic)
    timed: bool = False  # its first answer's wait is in sie_gateway_work_seconds


class Gateway:
    def __init__(self, settings: GatewaySettings):
        self.settings = settings
        self.metrics = GatewayMetrics()
        self.nc: Any = None
        self.js: Any = None
        self.store: Any = None
        self.inbox = ""
        self.calls: dict[str, Call] = {}
        self.workers: dict[str, WorkerSeen] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._lost_at: float | None = None  # when the NATS connection went, while it is away
        self._answered: OrderedDict[str, None] = OrderedDict()  # reply subjects of recent answered calls
        self._model_series: set[tuple[str, ...]] = set()  # sie_gateway_model_workers label sets shown

    async def start(self) -> None:
        self.nc = await nats_connection.connect(self.settings.nats_url, name="sie-gateway", on_state=self._on_state)
        self.js = self.nc.jetstream()
        for pool in self.settings.pools:
            await streams.ensure_streams(self.js, pool, ack_wait_s=self.settings.ack_wait_s)
        self.store = await streams.payload_store(self.js)
        self.inbox = self.nc.new_inbox()
        await self.nc.subscribe(f"{self.inbox}.*", cb=self._on_reply)
        await self.nc.subscribe(streams.HEARTBEAT_SUBJECT.format(pool="*"), cb=self._on_heartbeat)
        self._tasks.append(asyncio.get_running_loop().create_task(self._watch_pending()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.nc is not None:
            with contextlib.suppress(Exception):
                await self.nc.drain()

    def _on_state(self, connected: bool) -> None:
        if not connected:
            self._lost_at = self._lost_at or time.monotonic()
            return
        if self._lost_at is None:
            return
        self._lost_at = None
        for call in self.calls.values():
            call.in_doubt = call.in_doubt or not call.answered
        self._tasks.append(asyncio.get_running_loop().create_task(self._restore()))

    async def _restore(self) -> None:
        """The streams again, after a reconnect: a NATS that restarted without its store lost them."""
        try:
            for pool in self.settings.pools:
                await streams.ensure_streams(self.js, pool, ack_wait_s=self.settings.ack_wait_s)
        except Exception as exc:
            log.warning("gateway: could not check the streams after a reconnect: %s", nats_connection.describe(exc))

    def _check_connection(self) -> None:
        if self._lost_at is not None and time.monotonic() - self._lost_at > RECONNECT_GRACE_S:
            raise QueueFull(f"the gateway lost its connection to the work queue (NATS) over {RECONNECT_GRACE_S:.0f}s "
                            "ago; retry shortly", retry_after=5)  # fmt: skip

    async def _on_reply(self, msg: Any) -> None:
        call = self.calls.get(msg.subject)
        if call is None:
            self.metrics.dropped.labels("duplicate" if msg.subject in self._answered else "late").inc()
            reply = Reply.unpack(msg.data)
            if reply.more and reply.attempt:  # a streamed answer nobody reads: its worker stops generating
                await self._cancel(msg.subject, reply.attempt)
            return
        call.answered = True
        call.replies.put_nowait(Reply.unpack(msg.data))

    async def _on_heartbeat(self, msg: Any) -> None:
        beat = json.loads(msg.data)
        self.workers[beat["worker"]] = WorkerSeen.from_beat(beat)

    def batch_inflight(self) -> int:
        """Batch lines the live workers run at once at most (their --batch-inflight summed)."""
        return sum(seen.batch_inflight for worker, seen in self.workers.items() if self.live(worker))

    def live(self, worker: str) -> bool:
        seen = self.workers.get(worker)
        return seen is not None and time.monotonic() - seen.seen < WORKER_TTL_S

    def live_workers(self, pool: str) -> int:
        return sum(1 for w, seen in self.workers.items() if seen.pool == pool and self.live(w))

    def holder(self, pool: str, model_id: str) -> str:
        """The least busy live worker that holds the model, when some of the pool's workers do
        not (so that work goes where no load is needed); "" to let any worker take it."""
        holders, others = [], 0
        for worker, seen in self.workers.items():
            if seen.pool != pool or not self.live(worker):
                continue
            loaded = seen.models.get(model_id, {}).get("state") == "loaded"
            if loaded and seen.inflight < BUSY_INFLIGHT and seen.serves(model_id):  # not one wedged on it
                holders.append((seen.inflight, worker))
            else:
                others += 1
        return min(holders)[1] if holders and others else ""

    def reports(self, model_id: str) -> list[dict[str, Any]]:
        """What live workers say of a model, most useful first: loaded, then loading, then failed."""
        rank = {"loaded": 0, "loading": 1, "failed": 2}
        found = [seen.models[model_id] for w, seen in self.workers.items() if model_id in seen.models and self.live(w)]
        return sorted(found, key=lambda info: rank.get(str(info.get("state")), 3))

    async def _watch_pending(self) -> None:
        while True:
            for pool in self.settings.pools:
                self.metrics.workers.labels(pool).set(self.live_workers(pool))
                for priority in PRIORITIES:
                    try:
                        info = await self.js.consumer_info(streams.stream_name(pool, priority), streams.CONSUMER)
                        pending = info.num_pending + info.num_ack_pending
                    except Exception:  # the stream may be momentarily unavailable
                        continue
                    self.metrics.pending.labels(pool, priority).set(pending)
                parked = await pool_gauges.dead_letters(self.js, pool)
                if parked is not None:
                    self.metrics.dead_letters.labels(pool).set(parked)
            live = [(seen.pool, seen.models) for w, seen in self.workers.items() if self.live(w)]
            pool_gauges.set_counts(self.metrics.model_workers, pool_gauges.model_states(live), self._model_series)
            await asyncio.sleep(1.0)

    async def send(self, pool: str, priority: str, path: str, body: bytes, model_id: str, *,
                   wait_for_model: bool = True, deadline: float | None = None, cache: bool = True) -> Call:  # fmt: skip
        """Publish one work message (a msgpack request body); replies arrive on the returned call."""
        token = uuid.uuid4().hex
        call = Call(reply_to=f"{self.inbox}.{token}", pool=pool, priority=priority, target=self.holder(pool, model_id))
        call.headers = {streams.REPLY_TO: call.reply_to, streams.PATH: path, streams.PRIORITY: priority}
        request_id = current_request_id()
        if request_id is not None:  # the worker logs and answers under the caller's request id
            call.headers[h.REQUEST_ID] = request_id
        tracing.inject(call.headers)  # traceparent: the worker's spans continue this request's trace
        if deadline is not None:
            call.headers[streams.DEADLINE] = f"{deadline:.3f}"
        if not wait_for_model:
            call.headers[streams.WAIT_FOR_MODEL] = "false"
        if not cache:  # X-SIE-Cache: bypass holds on the worker too
            call.headers[h.CACHE] = "bypass"
        call.body = body
        if not streams.fits(self.nc, len(body)):
            call.body_ref = f"request-{token}"
            try:
                await streams.put_payload(self.nc, self.store, call.body_ref, body)
            except Exception as exc:  # NATS away, or the store full
                log.warning("storing a request body failed: %s", nats_connection.describe(exc))
                raise QueueFull("the work queue did not take the request; retry shortly", retry_after=2) from None
            call.headers[streams.BODY_REF], call.body = call.body_ref, b""
            self.metrics.by_reference.labels("request").inc()
        self.calls[call.reply_to] = call
        try:
            await self._publish(call, token)
        except BaseException:
            await self.close(call)
            raise
        return call

    async def _publish(self, call: Call, msg_id: str) -> None:
        headers = {**call.headers, streams.MSG_ID: msg_id}  # a retried publish is stored once
        where = streams.subject(call.pool, call.priority, call.target or None)
        for attempt in range(PUBLISH_TRIES):
            try:
                ack = await self.js.publish(where, call.body, headers=headers, timeout=PUBLISH_TIMEOUT_S)
                call.msg_id, call.seq = msg_id, int(ack.seq)
                return
            except Exception as exc:  # a publish ack that did not come back in time, a reconnect
                log.warning("publish to %s failed (attempt %d): %r", where, attempt + 1, exc)
                await asyncio.sleep(0.2 * (attempt + 1))
        raise QueueFull("the work queue did not take the request; retry shortly", retry_after=2)

    async def receive(self, call: Call, timeout_s: float | None = None) -> Reply:
        """The call's next reply, with a by-reference body fetched (and removed from the store).
        Work sent to one worker that stops heartbeating first goes back to the shared subject."""
        wait = self.settings.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise InferenceError(f"no worker answered within {wait:.0f}s; retry later", status=504)
            self._check_connection()
            try:
                reply = await asyncio.wait_for(call.replies.get(), min(left, 1.0))
                call.target = ""  # a worker is answering: nothing to send elsewhere any more
                if not call.timed:
                    call.timed = True
                    self.metrics.work_seconds.labels(call.pool, call.priority).observe(time.monotonic() - call.sent_at)
                break
            except TimeoutError:
                if call.target and not (self.live(call.target) and not self.workers[call.target].stopping):
                    log.warning("worker %s went away before taking work; sending it to the pool", call.target)
                    call.target = ""
                    await self._publish(call, uuid.uuid4().hex)
                elif call.in_doubt:
                    await self._recover(call)
        if reply.ref:
            try:
                reply.body = (await self.store.get(reply.ref)).data
            except Exception as exc:
                log.warning("fetching a reply body failed: %s", nats_connection.describe(exc))
                raise QueueFull("the answer could not be fetched from the work queue; retry", retry_after=2) from None
            with contextlib.suppress(Exception):
                await self.store.delete(reply.ref)
            self.metrics.by_reference.labels("reply").inc()
        return reply

    async def _recover(self, call: Call) -> None:
        """A call unanswered across a lost connection: once its work message has been taken (it
        is gone from the stream) and no answer came within ``REPLY_GRACE_S``, send it again."""
        if self._lost_at is not None or not await self._work_taken(call):
            call.gone_since = None
            return
        now = time.monotonic()
        if call.gone_since is None:
            call.gone_since = now
        elif now - call.gone_since >= REPLY_GRACE_S:
            log.warning("work on %s was taken but its answer was lost with the NATS connection; sending it again",
                        call.pool)  # fmt: skip
            call.in_doubt, call.gone_since = False, None
            if await self._answer_kept(call):
                return
            await self._publish(call, uuid.uuid4().hex)

    async def _answer_kept(self, call: Call) -> bool:
        """Whether a worker of the call's pool answered it lately and sends the answer again, or has it in
        hand (so sending the work again would run it twice)."""
        ask = json.dumps({"resend": call.reply_to}).encode()
        try:
            await self.nc.request(streams.CONTROL_SUBJECT.format(pool=call.pool), ask, timeout=ASK_TIMEOUT_S)
        except Exception:  # no worker has it (none answered in time, or none listens)
            return False
        log.info("a worker of %s had the answer lost with the NATS connection; not sending the work again", call.pool)
        return True

    async def _cancel(self, reply_to: str, attempt: str = "") -> None:
        """Tell the worker streaming this attempt of a call (every attempt, when empty) to stop."""
        with contextlib.suppress(Exception):
            await self.nc.publish(streams.cancel_subject(reply_to), attempt.encode())

    async def _work_taken(self, call: Call) -> bool:
        """Whether the call's work message has left its stream (acknowledged by a worker, or lost)."""
        from nats.js.errors import NotFoundError

        try:
            msg = await self.js.get_msg(streams.stream_name(call.pool, call.priority), call.seq)
        except NotFoundError:
            return True
        except Exception:  # unknown for now (a timeout): ask again later
            return False
        return (msg.headers or {}).get(streams.MSG_ID) != call.msg_id  # the sequence now holds another message

    async def close(self, call: Call) -> None:
        self.calls.pop(call.reply_to, None)
        if call.answered:
            self._answered[call.reply_to] = None
            if len(self._answered) > RECENT_ANSWERS:
                self._answered.popitem(last=False)
        if call.body_ref:
            with contextlib.suppress(Exception):
                await self.store.delete(call.body_ref)

    async def manage(self, pool: str, action: str, model_id: str, timeout_s: float) -> list[Reply]:
        """A management ``action`` on the pool's workers, as their own POST /v1/models/{id}/{action}:
        ``reload`` (clear a failed load, load again) and ``load`` go to the first worker that answers;
        ``evict`` to every live worker (each holds its own copy), answered within ``timeout_s``."""
        subject, command = streams.CONTROL_SUBJECT.format(pool=pool), json.dumps({action: model_id}).encode()
        if action != "evict":
            try:
                msg = await self.nc.request(subject, command, timeout=timeout_s)
            except Exception:  # no responders, or none answered in time
                message = f"no worker of pool {pool} answered the {action} in {timeout_s:.0f}s"
                raise InferenceError(message, status=504) from None
            return [Reply.unpack(msg.data)]
        expected, replies = self.live_workers(pool), asyncio.Queue[Reply]()
        inbox = self.nc.new_inbox()

        async def answered(msg: Any) -> None:
            replies.put_nowait(Reply.unpack(msg.data))

        subscription = await self.nc.subscribe(inbox, cb=answered)
        answers: list[Reply] = []
        try:
            await self.nc.publish(subject, command, reply=inbox)
            with contextlib.suppress(TimeoutError):
                while len(answers) < expected:
                    answers.append(await asyncio.wait_for(replies.get(), timeout_s))
        finally:
            await subscription.unsubscribe()
        return answers

    async def rest_of_stream(self, call: Call, first: Reply) -> AsyncGenerator[bytes, None]:
        """The parts of a streamed answer after ``first``, until the last. Raises INFERENCE_ERROR
        if the worker producing it stops heartbeating (its work is not redone: the
        caller has already seen part of the answer), QUEUE_FULL if a part went missing (lost
        with a NATS connection: the text would have a hole); tells the worker to stop if the
        caller leaves first or the stream fails."""
        finished, last, stopped = False, first.part, {first.source}
        try:
            while True:
                try:
                    reply = await self.receive(call, timeout_s=1.0)
                except InferenceError:
                    if self.live(first.worker):
                        continue
                    finished = True
                    raise InferenceError("the worker streaming this answer stopped") from None
                if reply.source != first.source:
                    self.metrics.dropped.labels("duplicate").inc()
                    if reply.attempt and reply.source not in stopped:  # another worker's (or delivery's) stream
                        stopped.add(reply.source)
                        await self._cancel(call.reply_to, reply.attempt)
                    continue
                if last and reply.part != last + 1:
                    raise QueueFull("part of this streamed answer was lost with the connection to the work queue "
                                    "(NATS); retry", retry_after=2)  # fmt: skip
                last = reply.part
                finished = not reply.more
                yield reply.body
                if finished:
                    return
        finally:
            if not finished:
                await self._cancel(call.reply_to)
            await self.close(call)
