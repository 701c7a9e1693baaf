"""The threads that run models: work in order on one thread, the thread and its OpenMP team gone
after an idle spell, loads on a thread that ends with them."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError

import pytest
import torch

from sie_server.compute_thread import ComputeThread, in_own_thread


def os_threads() -> set[str]:
    return set(os.listdir("/proc/self/task"))


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_work_runs_in_order_on_one_thread_and_errors_come_back() -> None:
    lane = ComputeThread("test-lane", idle_s=5)
    seen: list[tuple[int, str]] = []

    def square(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        return i * i

    futures = [lane.submit(square, i) for i in range(20)]
    assert [f.result(10) for f in futures] == [i * i for i in range(20)]
    assert [i for i, _ in seen] == list(range(20))
    assert {name for _, name in seen} == {"test-lane-1"}
    failed = lane.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed.result(10)
    assert lane.submit(lambda: "still serving").result(10) == "still serving"
    lane.shutdown()


def test_the_thread_ends_when_idle_and_a_new_one_takes_the_next_work() -> None:
    lane = ComputeThread("test-idle", idle_s=0.2)
    first = lane.submit(threading.current_thread).result(10)
    assert lane.alive
    assert wait_for(lambda: not lane.alive)
    first.join(5)
    assert not first.is_alive()
    second = lane.submit(lambda: threading.current_thread().name).result(10)
    assert lane.started == 2 and (first.name, second) == ("test-idle-1", "test-idle-2")
    lane.shutdown()
    assert not lane.alive


def test_shutdown_cancels_queued_work_and_refuses_more() -> None:
    lane = ComputeThread("test-stop", idle_s=5)
    gate = threading.Event()
    running = lane.submit(gate.wait, 10)
    queued = [lane.submit(lambda: "never") for _ in range(3)]
    assert wait_for(running.running)
    lane.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert running.result(10) is True
    for future in queued:
        with pytest.raises(CancelledError):
            future.result(10)
    with pytest.raises(RuntimeError, match="shut down"):
        lane.submit(lambda: None)


def test_an_ended_lane_takes_its_openmp_team_with_it() -> None:
    """The point of ending: libgomp keeps a team's workers until their thread exits, and once teams
    outnumber the CPUs every team sleeps between kernels instead of spinning."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        lane = ComputeThread("test-omp", idle_s=0.3)
        x = torch.randn(512, 512)
        before = os_threads()

        def parallel_kernel() -> set[str]:
            (x @ x).sum()
            return os_threads() - before

        started = lane.submit(parallel_kernel).result(30)
        assert len(started) >= 2  # the lane's thread and its OpenMP worker
        assert wait_for(lambda: not lane.alive)
        assert wait_for(lambda: not started & os_threads()), f"still running: {started & os_threads()}"
    finally:
        torch.set_num_threads(threads)


async def test_in_own_thread_runs_in_the_callers_context_on_a_thread_that_ends() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("request-7")
    seen: list[threading.Thread] = []

    def work(n: int) -> tuple[str, int]:
        seen.append(threading.current_thread())
        return var.get(), n + 1

    assert await in_own_thread("test-load", work, 41) == ("request-7", 42)
    assert seen[0] is not threading.current_thread() and seen[0].name == "test-load"
    seen[0].join(5)
    assert not seen[0].is_alive()
    with pytest.raises(ValueError, match="bad weights"):
        await in_own_thread("test-load", lambda: (_ for _ in ()).throw(ValueError("bad weights")))
    await asyncio.sleep(0)
