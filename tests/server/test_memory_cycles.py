"""Memory that comes back (issue 46, item 1), the short version of ``benchmarks/memory_cycles.py``: a real
server loads, calls and evicts the packaged MiniLM, a tiny GLiNER and a tiny OWLv2 detector five times;
after the last cycle its resident set, open files and threads are within a stated bound of the cycle-3
figures (after warm-up: the first loads import each family's libraries once).

The bound is loose enough for any CPU (RSS at most 25% + 48 MiB above cycle 3's, at most 2 more fds and 2
more threads) and still fails on a real leak: a MiniLM kept alive per cycle adds about 90 MiB a cycle, a
thread or a file left behind per load adds one per cycle."""

from __future__ import annotations

from pathlib import Path

from benchmarks.memory_cycles import DETECTOR, FAMILIES, GLINER, run_cycles
from tests.helpers.catalog import MINILM, copy_real, tiny_detector, tiny_gliner, write_config
from tests.helpers.server import offline_server

CYCLES = 5
RSS_GROWTH = 0.25  # of cycle 3's RSS ...
RSS_SLACK_KIB = 48 * 1024  # ... plus this
FD_SLACK = 2
THREAD_SLACK = 2


def test_rss_files_and_threads_come_back_over_load_evict_cycles(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    copy_real(catalog, MINILM)
    write_config(catalog, tiny_gliner(GLINER, tiny_models["gliner"]))
    write_config(catalog, tiny_detector(DETECTOR, tiny_models["owlv2"]))
    families = [FAMILIES[name] for name in ("minilm", "gliner", "detector")]
    with offline_server(catalog, tmp_path) as server:
        readings = run_cycles(server, families, CYCLES, checkpoints=(3, CYCLES))
        tail = server.tail()
    warm, last = readings[3], readings[CYCLES]
    figures = f"cycle 3: {warm.line()}; cycle {CYCLES}: {last.line()}; server log: {tail[-1500:]}"
    assert last.rss_kib <= warm.rss_kib * (1 + RSS_GROWTH) + RSS_SLACK_KIB, figures
    assert last.fds <= warm.fds + FD_SLACK, figures
    assert last.threads <= warm.threads + THREAD_SLACK, figures
