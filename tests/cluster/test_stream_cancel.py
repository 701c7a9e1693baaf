"""A cancel for a streamed answer names the attempt to stop, on real processes: the gateway sends one
naming a second stream's attempt when it drops that duplicate stream (tests/cluster/test_reply_dedupe.py),
and the worker producing the stream the caller reads must go on, while the one named stops decoding."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from sie_server.cluster.streams import Reply, cancel_subject
from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.metrics import scrape
from tests.helpers.wait import async_wait_until, wait_until_steady

ENDLESS = "test/endless"  # 20 ms a decode step


def test_a_cancel_naming_another_attempt_leaves_the_stream_and_one_naming_it_stops_it(
    cluster_catalog: Path, nats: Nats, tmp_path: Path
) -> None:
    import nats as nats_client

    w = worker(cluster_catalog, nats.url, tmp_path / "w.log", "--preload", ENDLESS)
    with running(w, Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log")) as (_, gateway):

        def steps() -> float:
            return scrape(w.url, "sie_batch_items_count", model=ENDLESS, absent_as_zero=True)

        async def scenario() -> tuple[float, float]:  # decode steps run, parts seen
            nc = await nats_client.connect(nats.url)
            seen: list[tuple[str, Reply]] = []

            async def on_part(msg: Any) -> None:
                seen.append((msg.subject, Reply.unpack(msg.data)))

            await nc.subscribe("_INBOX.*.*", cb=on_part)  # the gateway's inbox: the parts the worker sends
            body = {"prompt": "hello", "max_new_tokens": 400, "stream": True}
            async with (
                httpx.AsyncClient(base_url=gateway.url, timeout=60) as client,
                client.stream("POST", f"/v1/generate/{ENDLESS}", json=body) as response,
            ):
                assert response.status_code == 200
                await async_wait_until(lambda: len(seen) >= 3, message="no parts were streamed")
                reply_to, part = seen[0]
                assert part.attempt, "a streamed part names its attempt"
                await nc.publish(cancel_subject(reply_to), b"another-attempt")
                await nc.flush()
                before = len(seen)
                await async_wait_until(
                    lambda: len(seen) >= before + 20, timeout=30, message="a cancel for another attempt stopped it"
                )
                await nc.publish(cancel_subject(reply_to), part.attempt.encode())
                await nc.flush()
                still = "went on after a cancel naming its attempt"
                parts = await asyncio.to_thread(
                    wait_until_steady, lambda: float(len(seen)), quiet_s=0.5, message=f"the stream {still}"
                )
                ran = await asyncio.to_thread(wait_until_steady, steps, quiet_s=0.3, message=f"decoding {still}")
                assert seen[-1][1].more, "the stream ran to its end instead of stopping"
            # the caller leaves only now (its own cancel would stop every attempt)
            await nc.close()
            return ran, parts

        ran, parts = asyncio.run(scenario())
        assert 20 < parts < 300 and ran < 300  # stopped far short of the 400 tokens asked for
