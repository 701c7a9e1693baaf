"""The CPU cores a test process may use: under ``make test``'s pytest-xdist workers, each worker gets its own
share of the machine's cores, and the servers it starts inherit that share.

Two workers on two cores that each start servers with two threads would run four busy threads on two cores,
and llama.cpp's and OpenMP's spinning threads then wait on each other (a worker's SmolLM2 tests ran about 3x
slower than alone). Pinned to one core each, a worker's servers run one thread each (``--threads`` defaults
to the cores a process may use) beside the other worker's, and the waits of one worker (process starts,
NATS, timeouts) overlap the other's work.
"""

from __future__ import annotations

import contextlib
import os
import sys


def pin_worker() -> None:
    """Pin this pytest-xdist worker (every thread it has so far, and so every thread and process it starts)
    to its share of the cores: worker k of n gets the k-th n-th of them. Nothing when not a worker, with
    one worker, or when there are fewer cores than workers."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker or count < 2 or not hasattr(os, "sched_setaffinity"):
        return
    cores = sorted(os.sched_getaffinity(0))
    share = len(cores) // count
    if share == 0:
        return
    index = int(worker.removeprefix("gw")) % count
    mine = cores[index * share : (index + 1) * share]
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task), mine)
    if "torch" in sys.modules:  # imported already (by the tests' helpers): its own threads follow the share
        sys.modules["torch"].set_num_threads(len(mine))


def threads() -> int:
    """How many threads a server this process starts should run: the cores it may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
