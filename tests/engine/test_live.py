"""The status page's rolling minute (observability/live.py) on a clock the test moves."""

from __future__ import annotations

import pytest

from sie_server.observability.live import MAX_ERRORS, CounterWindow, LiveStats


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rate_and_percentiles_cover_the_last_minute_only() -> None:
    clock = Clock()
    live = LiveStats(clock)
    clock.now += 120  # up two minutes: the window is a whole minute
    for i in range(100):
        live.finished("m", "encode", "ok", (i + 1) / 1000)  # 1..100 ms
    figures = live.figures("m")
    assert figures.requests == 100 and figures.requests_per_s == pytest.approx(100 / 60)
    assert figures.p50_ms == pytest.approx(51) and figures.p99_ms == pytest.approx(100)
    clock.now += 61
    live.finished("m", "encode", "ok", 0.5)
    later = live.figures("m")
    assert later.requests == 1 and later.p50_ms == later.p99_ms == pytest.approx(500)


def test_a_young_server_divides_by_its_uptime() -> None:
    clock = Clock()
    live = LiveStats(clock)
    clock.now += 10
    for _ in range(20):
        live.finished("m", "score", "ok", 0.01)
    assert live.figures("m").requests_per_s == pytest.approx(2.0)
    assert live.figures("other").requests == 0 and live.figures("other").p50_ms is None


def test_decoded_tokens_per_second() -> None:
    clock = Clock()
    live = LiveStats(clock)
    clock.now += 60
    live.decoded("lm", 90)
    live.decoded("lm", 30)
    assert live.figures("lm").decode_tokens_per_s == pytest.approx(2.0)
    assert live.figures("encoder").decode_tokens_per_s is None


def test_errors_keep_the_newest_and_skip_callers_that_left() -> None:
    live = LiveStats(Clock())
    live.finished("m", "encode", "client_gone", 0.1)
    assert live.last_errors() == []
    for i in range(MAX_ERRORS + 5):
        live.finished(f"m{i}", "encode", "INVALID_INPUT", 0.1)
    errors = live.last_errors()
    assert len(errors) == MAX_ERRORS and errors[0].model == f"m{MAX_ERRORS + 4}"
    assert errors[0].code == "INVALID_INPUT" and "encode" in errors[0].message


def test_counter_window_answers_the_change_over_the_minute() -> None:
    clock = Clock()
    window = CounterWindow(clock)
    assert window.change({"batches": 5.0}) == {"batches": 5.0}  # first read: everything since start
    for _ in range(30):
        clock.now += 2
        window.change({"batches": 5.0})
    clock.now += 2
    assert window.change({"batches": 8.0}) == {"batches": 3.0}  # the 5 are over a minute old
    clock.now += 61
    assert window.change({"batches": 8.0}) == {"batches": 0.0}
