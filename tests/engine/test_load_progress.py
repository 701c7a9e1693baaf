"""A load says where it is: ``load_progress`` on the model's info while loading, and its stages in the log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sie_server.engine.model_report import model_info
from sie_server.errors import ModelLoadFailed, ModelLoading
from tests.engine.conftest import EngineFactory, fake_config
from tests.helpers.fake_adapter import Behaviour
from tests.helpers.wait import async_wait_until


async def test_a_slow_load_shows_its_stage_and_logs_each_with_seconds(
    make_engine: EngineFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sie_server.memory.pool")
    engine = make_engine(behaviour=Behaviour(load_delay_s=1.0))
    config = fake_config("test/slow", tmp_path / "slow")
    assert model_info(config, engine.pool).load_progress is None  # not loading: nothing to show

    with pytest.raises(ModelLoading):
        await engine.pool.acquire(config, wait=False, timeout_s=30)
    reading = await async_wait_until(
        lambda: (p := model_info(config, engine.pool).load_progress) and p.stage == "reading weights" and p,
        message="the load never showed its reading stage",
    )
    assert model_info(config, engine.pool).state == "loading"
    await async_wait_until(
        lambda: (p := model_info(config, engine.pool).load_progress) and p.stage_elapsed_s >= 0.2,
        message="the stage's seconds never grew",
    )
    assert reading.detail is not None and "MiB of weights" in reading.detail
    await engine.pool.acquire(config, wait=True, timeout_s=30)

    done = model_info(config, engine.pool)
    assert done.state == "loaded" and done.load_progress is None
    lines = [r.getMessage() for r in caplog.records if "test/slow" in r.getMessage()]
    stages = ["resolving weights", "planning memory", "reading weights", "warming up"]
    for stage in stages:
        assert any(f"{stage} took" in line for line in lines), (stage, lines)
    read = next(line for line in lines if "reading weights took" in line)
    assert float(read.split("took ")[1].split("s;")[0]) >= 1.0  # the slow part is timed where it happened
    assert any(line.startswith("loaded test/slow") for line in lines)


async def test_a_failed_load_leaves_no_progress_behind(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(behaviour=Behaviour(fail_load={"test/broken"}))
    config = fake_config("test/broken", tmp_path / "broken")

    with pytest.raises(ModelLoadFailed):
        await engine.pool.acquire(config, wait=True, timeout_s=30)

    info = model_info(config, engine.pool)
    assert info.state == "failed" and info.load_progress is None
