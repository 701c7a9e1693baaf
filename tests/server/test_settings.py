"""Settings: each default is written once (on the model), flags and SIE_* variables override it, and a
bad value is refused in one line naming the flag and its variable. The gateway checks its catalog
as the server does."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from sie_server import cli
from sie_server.catalog.loader import CatalogError, load_served
from sie_server.cli_flags import SettingsError, flags, read_settings
from sie_server.cluster.gateway import GatewaySettings
from sie_server.contract.limits import Limits
from sie_server.settings import Settings
from tests.helpers.catalog import REPO, tiny_embedder, write_config


@pytest.fixture(autouse=True)
def _no_sie_variables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """main() reads os.environ: start each test from none of the variables the flags read."""
    for name in list(os.environ):
        if name.startswith("SIE_") or name == "HF_HUB_OFFLINE":
            monkeypatch.delenv(name)
    yield


def _serve(argv: list[str], env: Mapping[str, str] | None = None) -> Settings:
    env = env or {}
    return read_settings(Settings, cli.build_parser(env).parse_args(["serve", *argv]), environ=env)


def _gateway(argv: list[str], env: Mapping[str, str] | None = None) -> GatewaySettings:
    env = env or {}
    return read_settings(GatewaySettings, cli.build_parser(env).parse_args(["gateway", *argv]), environ=env)


def test_no_flags_and_no_variables_give_the_models_defaults() -> None:
    assert _serve([]) == Settings()
    assert _gateway([]) == GatewaySettings()
    parsed = cli.build_parser({}).parse_args(["gateway"])
    assert (parsed.port, parsed.host, parsed.split_items) == (8080, "127.0.0.1", 32)
    limits = Limits()
    for settings in (Settings(), GatewaySettings()):
        assert (settings.max_items_per_request, settings.max_text_bytes, settings.max_body_bytes) == (
            limits.max_items,
            limits.max_text_bytes,
            limits.max_body_bytes,
        )


SERVE_CASES: list[tuple[str, str, str, str, Any]] = [
    # (flag, variable, field, value, what the field becomes)
    ("--host", "SIE_HOST", "host", "0.0.0.0", "0.0.0.0"),
    ("--port", "SIE_PORT", "port", "9001", 9001),
    ("--models-dir", "SIE_MODELS_DIR", "models_dir", "/srv/models", Path("/srv/models")),
    ("-m", "SIE_MODELS", "models", "a/b, c/d", ["a/b", "c/d"]),
    ("--preload", "SIE_PRELOAD", "preload", "a/b", ["a/b"]),
    ("--device", "SIE_DEVICE", "device", "cpu", "cpu"),
    ("--threads", "SIE_THREADS", "threads", "3", 3),
    ("--load-timeout-s", "SIE_LOAD_TIMEOUT_S", "load_timeout_s", "12.5", 12.5),
    ("--max-queued-items", "SIE_MAX_QUEUED_ITEMS", "max_queued_items", "10", 10),
    ("--max-items-per-request", "SIE_MAX_ITEMS", "max_items_per_request", "7", 7),
    ("--max-text-bytes", "SIE_MAX_TEXT_BYTES", "max_text_bytes", "100", 100),
    ("--max-body-bytes", "SIE_MAX_BODY_BYTES", "max_body_bytes", "1000", 1000),
    ("--memory-budget", "SIE_MEMORY_BUDGET", "memory_budget", "6GiB", "6GiB"),
    ("--pin", "SIE_PIN", "pin", "a/b,c/d", ["a/b", "c/d"]),
    ("--idle-evict-s", "SIE_IDLE_EVICT_S", "idle_evict_s", "60", 60.0),
    ("--batch-share", "SIE_BATCH_SHARE", "batch_share", "0.25", 0.25),
    ("--queue", "SIE_QUEUE", "queue", "nats://q:4222", "nats://q:4222"),
    ("--pool", "SIE_POOL", "pool", "gpu", "gpu"),
    ("--ack-wait-s", "SIE_ACK_WAIT_S", "ack_wait_s", "2", 2.0),
    ("--max-deliver", "SIE_MAX_DELIVER", "max_deliver", "9", 9),
    ("--cpu-precision", "SIE_CPU_PRECISION", "cpu_precision", "bf16,fp32", ["bf16", "fp32"]),
    ("--batch-max-tokens", "SIE_BATCH_MAX_TOKENS", "batch_max_tokens", "512", 512),
    ("--batch-max-tokens", "SIE_BATCH_MAX_TOKENS", "batch_max_tokens", "0", None),  # 0: no cap
]


@pytest.mark.parametrize(("flag", "var", "field", "value", "expected"), SERVE_CASES)
def test_serve_flag_and_variable_set_the_field(flag: str, var: str, field: str, value: str, expected: Any) -> None:
    assert getattr(_serve([flag, value]), field) == expected
    assert getattr(_serve([], {var: value}), field) == expected
    assert getattr(Settings(), field) != expected  # the case proves something


@pytest.mark.parametrize(
    ("flag", "var", "field"),
    [("--offline", "SIE_OFFLINE", "offline"), ("--single-lane", "SIE_SINGLE_LANE", "single_lane"),
     ("-v", "SIE_VERBOSE", "verbose"), ("--verbose", "SIE_VERBOSE", "verbose")],
)  # fmt: skip
def test_serve_switches(flag: str, var: str, field: str) -> None:
    assert getattr(_serve([]), field) is False
    assert getattr(_serve([flag]), field) is True
    for on in ("1", "true", "yes", "on"):
        assert getattr(_serve([], {var: on}), field) is True
    assert getattr(_serve([], {var: "0"}), field) is False


def test_offline_also_honours_hf_hub_offline() -> None:
    assert _serve([], {"HF_HUB_OFFLINE": "1"}).offline is True
    assert _serve([], {"HF_HUB_OFFLINE": "0"}).offline is False
    assert _serve([], {"SIE_OFFLINE": "0", "HF_HUB_OFFLINE": "1"}).offline is False  # SIE_OFFLINE first


def test_a_flag_beats_its_variable_and_an_empty_variable_is_unset() -> None:
    assert _serve(["--port", "9002"], {"SIE_PORT": "9001"}).port == 9002
    assert _serve([], {"SIE_PORT": ""}).port == 8080
    assert _serve([], {"SIE_MODELS": " "}).models is None
    assert _serve(["-m", ""]).models is None  # the whole catalog


GATEWAY_CASES: list[tuple[str, str, str, str, Any]] = [
    ("--nats", "SIE_NATS", "nats_url", "nats://n:4222", "nats://n:4222"),
    ("--host", "SIE_HOST", "host", "0.0.0.0", "0.0.0.0"),
    ("--port", "SIE_PORT", "port", "9003", 9003),
    ("--models", "SIE_MODELS", "models", "a/b", ["a/b"]),
    ("--default-pool", "SIE_DEFAULT_POOL", "default_pool", "cpu", "cpu"),
    ("--hold-s", "SIE_HOLD_S", "hold_s", "5", 5.0),
    ("--timeout-s", "SIE_GATEWAY_TIMEOUT_S", "timeout_s", "60", 60.0),
    ("--split-items", "SIE_SPLIT_ITEMS", "split_items", "8", 8),
    ("--ack-wait-s", "SIE_ACK_WAIT_S", "ack_wait_s", "3", 3.0),
    ("--max-items-per-request", "SIE_MAX_ITEMS", "max_items_per_request", "7", 7),
    ("--max-text-bytes", "SIE_MAX_TEXT_BYTES", "max_text_bytes", "100", 100),
    ("--max-body-bytes", "SIE_MAX_BODY_BYTES", "max_body_bytes", "1000", 1000),
]


@pytest.mark.parametrize(("flag", "var", "field", "value", "expected"), GATEWAY_CASES)
def test_gateway_flag_and_variable_set_the_field(flag: str, var: str, field: str, value: str, expected: Any) -> None:
    assert getattr(_gateway([flag, value]), field) == expected
    assert getattr(_gateway([], {var: value}), field) == expected
    assert getattr(GatewaySettings(), field) != expected


def test_gateway_routes_and_tokens() -> None:
    settings = _gateway(["--route", "Qwen/*=gpu", "--route", "*=cpu"], {"SIE_AUTH_TOKENS": "one, two"})
    assert settings.routes == [("Qwen/*", "gpu"), ("*", "cpu")]
    assert settings.pool_for("Qwen/Qwen3-0.6B") == "gpu" and settings.pool_for("a/b") == "cpu"
    assert settings.auth_tokens == ("one", "two")
    assert _gateway([]).auth_tokens == ()


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """main()'s stderr for settings it refuses with exit status 2 (before anything starts)."""
    try:
        status = cli.main(argv)
    except SystemExit as exc:  # argparse refuses a flag's value itself
        status = int(exc.code or 0)
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["serve"], {"SIE_PORT": "abc"}, ["--port", "SIE_PORT", "'abc'"]),
        (["serve", "--max-items-per-request", "0"], {}, ["--max-items-per-request", "SIE_MAX_ITEMS", "'0'"]),
        (["serve"], {"SIE_MAX_ITEMS": "-1"}, ["--max-items-per-request", "SIE_MAX_ITEMS", "'-1'"]),
        (["serve", "--batch-share", "2"], {}, ["--batch-share", "SIE_BATCH_SHARE", "less than or equal to 1"]),
        (["serve"], {"SIE_OFFLINE": "maybe"}, ["--offline", "SIE_OFFLINE", "'maybe'"]),
        (["serve"], {"SIE_CPU_PRECISION": "fp16"}, ["--cpu-precision", "SIE_CPU_PRECISION", "unknown fp16"]),
        (["gateway"], {"SIE_GATEWAY_TIMEOUT_S": "soon"}, ["--timeout-s", "SIE_GATEWAY_TIMEOUT_S", "'soon'"]),
        (["gateway", "--split-items", "0"], {}, ["--split-items", "SIE_SPLIT_ITEMS"]),
        (["gateway", "--route", "gpu"], {}, ["--route", "PATTERN=POOL"]),
    ],
)
def test_a_bad_value_is_one_line_naming_the_flag_and_its_variable(
    argv: list[str], env: dict[str, str], named: list[str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(cli, "serve", lambda settings: pytest.fail("the server started"))
    monkeypatch.setattr(cli, "run_gateway", lambda settings: pytest.fail("the gateway started"))
    err = _refusal(argv, capsys)
    for text in named:
        assert text in err


def test_settings_error_lists_every_bad_value() -> None:
    env = {"SIE_OFFLINE": "maybe", "SIE_CPU_PRECISION": "fp16"}
    with pytest.raises(SettingsError) as caught:
        _serve([], env)
    assert "--offline" in str(caught.value) and "--cpu-precision" in str(caught.value)


# --- the gateway checks its catalog as the server does --------------------------------------------


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    write_config(folder, tiny_embedder("org/good", tmp_path / "weights"))
    return folder


def test_the_gateway_loads_a_good_catalog(catalog: Path) -> None:
    args = cli.build_parser({}).parse_args(["gateway", "--models-dir", str(catalog), "-m", "org__good"])
    settings = cli.gateway_settings(args, environ={})
    assert [c.id for c in settings.catalog.list()] == ["org/good"]


def _server_refusal(settings: Settings) -> str:
    from sie_server.compose import build_state

    with pytest.raises(ValueError) as caught:
        build_state(settings)
    return str(caught.value)


@pytest.mark.parametrize("case", ["invalid file", "unknown id"])
def test_the_gateway_refuses_what_the_server_refuses(
    case: str, catalog: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    models: list[str] = []
    if case == "invalid file":
        (catalog / "broken.yaml").write_text("id: org/broken\nadapter: [not, a, name\n")
        expected = ["the catalog has invalid files", "broken.yaml"]
    else:
        models = ["org/good", "org/missing"]
        expected = [f"--models names ids that are not in {catalog}: org/missing"]
    server = _server_refusal(Settings(models_dir=catalog, models=models or None))
    with pytest.raises(CatalogError) as caught:
        load_served(catalog, models or None)
    assert str(caught.value) == server  # one function, one message
    monkeypatch.setattr(cli, "run_gateway", lambda settings: pytest.fail("the gateway started"))
    argv = ["gateway", "--models-dir", str(catalog), *(["-m", ",".join(models)] if models else [])]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"sie-server: {server}"
    for text in expected:
        assert text in err


def test_the_docs_list_every_flag_and_variable() -> None:
    # the site's Configuration page, and Security for the keys and limits per key
    pages = "".join((REPO / "docs" / page).read_text() for page in ("operate/configuration.md", "security.md"))
    for model in (Settings, GatewaySettings):
        for flag in flags(model):
            if not flag.cli.no_flag:
                assert flag.flag in pages, flag.flag
            for var in flag.envs:
                assert var in pages, var
