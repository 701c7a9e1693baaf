"""A queue worker: an ordinary server that also pulls work for its pool from JetStream.

Each message is one HTTP request (a whole request, or a slice of an encode/extract
request's items). The worker runs it through its own app in-process — same validation,
same engine, same answers — so items from every message it holds are batched together by
its scheduler. It pulls from the pool's shared consumer and from its own (work the gateway
sent to it because it holds the model), one loop per consumer and priority class;
batch-class work never takes more than half the worker's room and is not fetched while
interactive work may be queued, so interactive work always gets in first. A worker that has to
load the model keeps the message in progress while it loads (a nak per retry would count
as a delivery, and a slow load would dead-letter its requests). The worker acks after the
reply is published (a streamed answer: after its first part), and after ``max_deliver``
attempts answers the caller with an error and parks the message in the dead-letter stream.

A worker that loses NATS mid-work finishes it: its answer and ack wait in the client's buffer
and go out when the connection is back (if the buffer is full, or the connection closed, the
message stays unacked and is redelivered). Each handling of a delivery answers under its own
``attempt``, so the gateway keeps the first answer to a call and drops any other. After a
reconnect the worker makes sure its streams and consumers still exist.

A worker remembers the answers it gave lately (cluster/answers.py): a second copy of a call it
answered (a redelivery, or the gateway sending the call again because the answer was lost) is
answered from memory, not run again, and a gateway may ask the pool for such an answer first.
A streamed answer's cancel names the attempt to stop (empty: every attempt of the call).

Beside its live work the worker takes the cluster's Batch API lines (cluster/batch_worker.py).

Its ``/readyz`` judges its models as a server's does (``engine/model_health.py``: a pinned or preloaded
model whose load failed, a stalled batch: 503 ``"failing"`` naming the model), and is 503
``"disconnected"`` while it has no NATS. Its heartbeat carries the models that ``/readyz`` names, so a
gateway counts it as not serving them (``cluster/gateway_readiness.py``). While its ``/readyz`` names a problem
and another worker of the pool names none, it takes no work from the pool's shared consumer and no batch
lines, only work sent to it by name (``cluster/pool_peers.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from typing import Any

from sie_server.cluster import nats_connection, streams
from sie_server.cluster.answers import RecentAnswers
from sie_server.cluster.asgi_call import call_app
from sie_server.cluster.batch_store import BatchStore
from sie_server.cluster.batch_worker import BatchLines
from sie_server.cluster.pool_peers import PoolPeers
from sie_server.cluster.streams import Reply
from sie_server.contract import envelope
from sie_server.contract import headers as h
from sie_server.contract.codec import MSGPACK, SSE, dumps_json
from sie_server.contract.headers import PRIORITIES
from sie_server.errors import InferenceError
from sie_server.memory.slots import ModelState
from sie_server.observability.logging import REQUEST_ID

log = logging.getLogger(__name__)
MANAGEMENT = ("reload", "load", "evict")  # the control messages a gateway sends for POST /v1/models/{id}/...
FORWARDED = (h.ERROR_CODE, h.RETRY_AFTER, h.CONTENT_TYPE)
FETCH_WAIT_S = 1.0


class QueueWorker:
    def __init__(
        self,
        app: Any,
        *,
        nats_url: str,
        pool: str,
        max_inflight: int = 256,
        ack_wait_s: float = 30.0,
        max_deliver: int = 5,
    ) -> None:
        self.app = app
        self.nats_url = nats_url
        self.pool = pool
        self.max_inflight = max_inflight
        self.ack_wait_s = ack_wait_s
        self.max_deliver = max_deliver
        self.id = streams.worker_id(f"{socket.gethostname()}-{os.getpid()}")
        self._inflight: dict[str, set[asyncio.Task[None]]] = {p: set() for p in PRIORITIES}
        self._freed = asyncio.Event()
        self._stopping = asyncio.Event()
        self.nc: Any = None
        self.js: Any = None
        self.store: Any = None
        self._last_beat: dict[str, str] = {}
        self._interactive_backlog = False
        self._restoring: asyncio.Task[None] | None = None
        self.answers = RecentAnswers()
        self.peers = PoolPeers(pool, self.id, self._problems)

    async def run(self) -> None:
        state = self.app.state.sie
        state.queue_connected = False  # /readyz is 503 until NATS answers, and whenever it is lost

        def on_state(connected: bool) -> None:
            if connected and not state.queue_connected and self.js is not None:  # back after a loss
                self._restoring = asyncio.get_running_loop().create_task(self._restore())
            state.queue_connected = connected

        self.nc = await nats_connection.connect(self.nats_url, name=f"sie-worker-{self.id}", on_state=on_state)
        self.js = self.nc.jetstream()
        await streams.ensure_streams(self.js, self.pool, ack_wait_s=self.ack_wait_s)
        self.store = await streams.payload_store(self.js)
        with contextlib.suppress(Exception):
            await self.js.add_stream(name=streams.DEAD_LETTER_STREAM, subjects=["sie.dead.>"])
        own = await streams.ensure_own_consumers(self.js, self.pool, self.id, ack_wait_s=self.ack_wait_s)
        subs = []
        for p in PRIORITIES:
            name = streams.stream_name(self.pool, p)
            for durable, worker in ((own, self.id), (streams.CONSUMER, None)):
                where = streams.subject(self.pool, p, worker)
                subs.append((p, await self.js.pull_subscribe(where, durable, stream=name), worker is None))
        settings = self.app.state.sie.settings  # Batch API lines: --batch-inflight at once, beside live work
        batches = BatchLines(self.app, await BatchStore.open(self.nc, ack_wait_s=self.ack_wait_s),
                             inflight=settings.batch_inflight, ack_wait_s=self.ack_wait_s,
                             max_line_bytes=settings.max_body_bytes, worker=self.id,
                             stand_aside=self.peers.stand_aside)  # fmt: skip
        await self.nc.subscribe(streams.HEARTBEAT_SUBJECT.format(pool=self.pool), cb=self.peers.on_beat)
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeat())
        await self.nc.subscribe(streams.CONTROL_SUBJECT.format(pool=self.pool), cb=self._on_control)
        log.info("worker %s pulling pool %s from %s", self.id, self.pool, nats_connection.redacted(self.nats_url))
        try:
            await asyncio.gather(*(self._pull(*sub) for sub in subs), batches.run(self._stopping))
        finally:
            heartbeat.cancel()
            running = [t for tasks in self._inflight.values() for t in tasks]
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.nc.close()  # unacked work goes back to the stream for other workers

    async def _restore(self) -> None:
        """The pool's streams and this worker's consumers again (a NATS restarted without its store lost them)."""
        try:
            await streams.ensure_streams(self.js, self.pool, ack_wait_s=self.ack_wait_s)
            await streams.ensure_own_consumers(self.js, self.pool, self.id, ack_wait_s=self.ack_wait_s)
        except Exception as exc:
            log.warning("worker %s: could not check the streams after a reconnect: %s", self.id,
                        nats_connection.describe(exc))  # fmt: skip

    def stop(self) -> None:
        self._stopping.set()
        if self.nc is not None:  # gateways stop sending work to this worker's own subject at once
            asyncio.get_running_loop().create_task(self._beat())

    @property
    def inflight(self) -> int:
        return sum(len(tasks) for tasks in self._inflight.values())

    def room(self, priority: str) -> int:
        """Messages this class may fetch now: batch-class work keeps half the room free, and
        waits while interactive work may still be queued (its last fetch came back full)."""
        room = self.max_inflight - self.inflight
        if priority != PRIORITIES[0]:
            if self._interactive_backlog:
                return 0
            room = min(room, self.max_inflight // 2 - len(self._inflight[priority]))
        return room

    async def _pull(self, priority: str, sub: Any, shared: bool) -> None:
        """Fetch and start work from one consumer; from the pool's ``shared`` one only while this worker does
        not step aside for a ready peer (cluster/pool_peers.py)."""
        while not self._stopping.is_set() and not self.app.state.sie.draining:
            room = self.room(priority)
            if shared and room > 0 and self.peers.stand_aside():
                room = 0
            if room <= 0:
                self._freed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._freed.wait(), FETCH_WAIT_S)
                continue
            try:
                got = await sub.fetch(batch=room, timeout=FETCH_WAIT_S)
            except TimeoutError:  # nothing waiting (nats raises asyncio's and its own TimeoutError)
                got = []
            except Exception as exc:  # a reconnect in progress: keep pulling once it is back
                if self.nc.is_connected:  # while NATS is away, the client logs each reconnect attempt
                    log.warning("worker %s: fetching %s work failed: %r", self.id, priority, exc)
                await asyncio.sleep(1.0)
                continue
            if priority == PRIORITIES[0]:
                self._interactive_backlog = len(got) >= room
            for msg in got:
                task = asyncio.get_running_loop().create_task(self._handle(msg))
                self._inflight[priority].add(task)
                task.add_done_callback(self._done(priority))

    def _done(self, priority: str) -> Any:
        def discard(task: asyncio.Task[None]) -> None:
            self._inflight[priority].discard(task)
            self._freed.set()
            if not task.cancelled() and task.exception() is not None:
                log.error("worker %s: a message failed", self.id, exc_info=task.exception())

        return discard

    async def _handle(self, msg: Any) -> None:
        headers = msg.headers or {}
        delivered = msg.metadata.num_delivered
        if delivered > self.max_deliver:
            await self._dead_letter(msg, delivered)
            return
        from nats.errors import Error as NatsError

        reply_to = headers.get(streams.REPLY_TO, "")
        REQUEST_ID.set(headers.get(h.REQUEST_ID))  # this task's log lines carry the caller's request id
        if await self._answered_before(msg, reply_to):
            return
        keepalive = asyncio.get_running_loop().create_task(self._keep_alive(msg))
        self.answers.begin(reply_to, msg.metadata.sequence.stream)
        complete = False
        try:
            complete = await self._answer(msg, headers, uuid.uuid4().hex[:12])
        except NatsError as exc:  # the answer could not go out: unacked, the work is redelivered
            log.warning("worker %s: could not answer (%s); the work will be redelivered", self.id,
                        nats_connection.describe(exc))  # fmt: skip
        finally:
            keepalive.cancel()
            self.answers.end(reply_to, complete=complete)

    async def _answered_before(self, msg: Any, reply_to: str) -> bool:
        """A copy of a call answered here lately gets that answer again, not a second run; a copy of one
        in hand here now is left to it (a redelivery of the same message: the first one's ack settles it;
        another copy, a resend: acked now)."""
        in_hand = self.answers.working(reply_to)
        if in_hand is not None:
            if in_hand != msg.metadata.sequence.stream:
                await msg.ack()
            log.info("worker %s: a copy of a call in hand here was not run again", self.id)
            return True
        parts = self.answers.replay(reply_to)
        if parts is None:
            return False
        for packed in parts:
            await self.nc.publish(reply_to, packed)
        await msg.ack()
        log.info("worker %s: a copy of a call answered here was answered again from memory", self.id)
        return True

    async def _answer(self, msg: Any, headers: dict[str, str], attempt: str) -> bool:
        """Run the call and publish its answer; whether all of it went out (a stream the caller left: not)."""
        body = msg.data
        if streams.BODY_REF in headers:
            body = (await self.store.get(headers[streams.BODY_REF])).data
        call_headers = {
            h.CONTENT_TYPE: MSGPACK,
            h.ACCEPT: MSGPACK,
            h.PRIORITY: headers.get(streams.PRIORITY, "interactive"),
            h.WAIT_FOR_MODEL: headers.get(streams.WAIT_FOR_MODEL, "true"),
            h.QUEUE_TOKEN: self.app.state.sie.queue_token,
        }
        for carried in (h.REQUEST_ID, h.TRACEPARENT, h.TRACESTATE, h.CACHE):  # its id, trace and cache choice go on
            if carried in headers:
                call_headers[carried] = headers[carried]
        if streams.DEADLINE in headers:  # what is left of the caller's wait (0: it has passed; the route refuses)
            left_ms = (float(headers[streams.DEADLINE]) - time.time()) * 1000
            call_headers[h.TIMEOUT_MS] = str(max(0, int(left_ms)))
        response = await call_app(self.app, headers.get(streams.PATH, "/"), body, call_headers)
        kept = {k: v for k, v in response.headers.items() if k in FORWARDED}
        reply_to = headers[streams.REPLY_TO]
        if not response.headers.get(h.CONTENT_TYPE, "").startswith(SSE):
            await self._reply(reply_to, Reply(response.status, kept, await response.read(), worker=self.id,
                                              attempt=attempt))  # fmt: skip
            await msg.ack()
            return True
        left = asyncio.Event()

        async def on_cancel(cancel: Any) -> None:
            if not cancel.data or cancel.data == attempt.encode():  # this attempt, or every one
                left.set()

        cancel = await self.nc.subscribe(streams.cancel_subject(reply_to), cb=on_cancel)
        acked, number, complete = False, 0, False
        try:
            async for part in response.parts:
                if left.is_set():  # the caller left: stop generating (the app sees its client go)
                    break
                number += 1
                await self._reply(reply_to, Reply(response.status, kept, part, more=True, worker=self.id,
                                                  attempt=attempt, part=number))  # fmt: skip
                if not acked:  # the caller has part of the answer now: redoing it elsewhere would repeat it
                    await msg.ack()
                    acked = True
            else:
                await self._reply(reply_to, Reply(response.status, kept, b"", worker=self.id, attempt=attempt,
                                                  part=number + 1))  # fmt: skip
                complete = True
        finally:
            await response.parts.aclose()
            await cancel.unsubscribe()
        if not acked:
            await msg.ack()
        return complete

    async def _reply(self, reply_to: str, reply: Reply) -> None:
        await self._beat(only_if_changed=True)  # the gateway learns of a load or a failure before the answer
        packed = reply.pack()
        if not streams.fits(self.nc, len(packed)):
            reply.ref = f"reply-{uuid.uuid4().hex}"
            await streams.put_payload(self.nc, self.store, reply.ref, reply.body)
            reply.body = b""
            packed = reply.pack()
        await self.nc.publish(reply_to, packed)
        self.answers.add(reply_to, packed)

    async def _dead_letter(self, msg: Any, delivered: int) -> None:
        headers = msg.headers or {}
        message = (f"this work was attempted {delivered - 1} times without an answer (workers died or timed out); "
                   "it was moved to the dead-letter stream")  # fmt: skip
        error = InferenceError(message)
        body = dumps_json(envelope.error_body(error))
        await self.js.publish(streams.DEAD_LETTER_SUBJECT.format(pool=self.pool), msg.data, headers=headers)
        error_headers = {**envelope.error_headers(error.code.value), h.CONTENT_TYPE: "application/json"}
        await self._reply(headers.get(streams.REPLY_TO, ""), Reply(500, error_headers, body, worker=self.id))
        await msg.term()

    async def _resend(self, msg: Any, reply_to: str) -> None:
        parts = self.answers.replay(reply_to)
        if parts is None and self.answers.working(reply_to) is None:
            return
        for packed in parts or []:
            await self.nc.publish(reply_to, packed)
        log.info("worker %s: a gateway asked for an answer it lost; %s", self.id,
                 "sent it again" if parts else "the call is in hand here")  # fmt: skip
        if msg.reply:
            await self.nc.publish(msg.reply, Reply(200, worker=self.id).pack())

    async def _keep_alive(self, msg: Any) -> None:
        while True:
            await asyncio.sleep(self.ack_wait_s / 3)
            with contextlib.suppress(Exception):  # NATS away: the work may be redelivered, its answer deduplicated
                await msg.in_progress()

    async def _heartbeat(self) -> None:
        while True:
            await self._beat()
            await asyncio.sleep(2.0)

    async def _beat(self, *, only_if_changed: bool = False) -> None:
        """Tell the gateways this worker is alive, and what each model it has touched is doing."""
        state = self.app.state.sie
        models = {s.config.id: state.model_info(s.config).model_dump() for s in state.pool.slots()
                  if s.state is not ModelState.AVAILABLE}  # fmt: skip
        problems = self._problems()
        summary = {model_id: str(info["state"]) for model_id, info in models.items()}
        summary.update({f"{model_id} problem": str(p["problem"]) for model_id, p in problems.items()})
        if only_if_changed and summary == self._last_beat:
            return
        self._last_beat = summary
        stopping = self._stopping.is_set() or bool(state.draining)
        beat = {
            "worker": self.id,
            "pool": self.pool,
            "models": models,
            "inflight": self.inflight,
            "stopping": stopping,
            "batch_inflight": state.settings.batch_inflight,
            "problems": problems,
        }
        with contextlib.suppress(Exception):
            await self.nc.publish(streams.HEARTBEAT_SUBJECT.format(pool=self.pool), json.dumps(beat).encode())

    def _problems(self) -> dict[str, dict[str, Any]]:
        """The models this worker's own ``/readyz`` names, and why (``engine/model_health.py``): a gateway counts
        the worker as not serving them (``cluster/gateway_readiness.py``)."""
        ready = self.app.state.sie.readiness()
        judge = getattr(self.app.state, "judge_readiness", None)
        if judge is not None:
            ready = judge(ready)
        return {model_id: problem.model_dump() for model_id, problem in (ready.models or {}).items()}

    async def _on_control(self, msg: Any) -> None:
        """``{"reload" | "load" | "evict": id}`` from a gateway: this worker's own POST
        /v1/models/{id}/{action} (reload: clear a failed load and load again), answered to the gateway.
        ``{"resend": reply subject}``: if this worker answered that call lately, send the answer again
        and say so; if it has the call in hand, say so; else stay silent (another worker may answer)."""
        command = json.loads(msg.data)
        if "resend" in command:
            await self._resend(msg, str(command["resend"]))
            return
        action = next((a for a in MANAGEMENT if a in command), None)
        if action is None:
            return
        token = {h.QUEUE_TOKEN: self.app.state.sie.queue_token}
        response = await call_app(self.app, f"/v1/models/{command[action]}/{action}", b"", token)
        kept = {k: v for k, v in response.headers.items() if k in FORWARDED}
        body = await response.read()
        await self._beat()
        if msg.reply:
            await self.nc.publish(msg.reply, Reply(response.status, kept, body, worker=self.id).pack())
