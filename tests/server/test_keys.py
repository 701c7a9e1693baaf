"""API keys, admin keys and per-key limits on a real server process.

With keys set, ``/v1/`` and ``/v2/`` answer 401 without a key and 403 with a wrong one; probes stay
open, and ``/metrics`` too unless ``--metrics-need-key``. Keys come from flags, ``SIE_API_KEYS`` or a
file. Management routes take the admin key only. One key past ``--max-queued-per-key`` items in
flight gets 429 RATE_LIMITED with Retry-After while another key is still served.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sie_sdk import AuthenticationError, PermissionDeniedError, RateLimitedError, SIEClient
from sie_server import cli
from sie_server.cli_flags import read_settings
from sie_server.cluster.gateway_settings import GatewaySettings
from tests.helpers.catalog import tiny_embedder, tiny_llm, write_config
from tests.helpers.server import ServerProcess
from tests.helpers.wait import wait_until

FAULTS = "tests.helpers.fault_adapters"
EMBEDDER = "test/tiny-embedder"
ENDLESS = "test/endless"
ONE_ITEM = {"items": [{"text": "hello"}]}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("keys-catalog")
    write_config(folder, tiny_embedder(EMBEDDER, tiny_models["embedder"]))
    write_config(folder, {**tiny_llm(ENDLESS, tiny_models["llm"]), "adapter": f"{FAULTS}:EndlessSlowLM"})
    return folder


@pytest.fixture(scope="module")
def server(catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("keys")
    key_file = folder / "keys.txt"
    key_file.write_text("# the team's keys\nfrom-file\n\n")
    proc = ServerProcess(
        catalog,
        "--offline",
        "--threads",
        "1",
        "--api-key",
        "alpha",
        "--api-key-file",
        str(key_file),
        "--admin-key",
        "root",
        "--max-queued-per-key",
        "2",
        env={"SIE_API_KEYS": "", "SIE_API_KEY": ""},
        log=folder / "server.log",
    )
    proc.wait_ready()
    try:
        yield proc
    finally:
        proc.stop()


def test_work_routes_need_a_key_and_probes_do_not(server: ServerProcess) -> None:
    url = f"{server.url}/v1/encode/{EMBEDDER}"
    missing = httpx.post(url, json=ONE_ITEM)
    assert missing.status_code == 401 and missing.headers["x-sie-error-code"] == "UNAUTHENTICATED"
    assert "Authorization: Bearer" in missing.json()["detail"]["message"]
    wrong = httpx.post(url, json=ONE_ITEM, headers=bearer("alphabet"))
    assert wrong.status_code == 403 and wrong.headers["x-sie-error-code"] == "FORBIDDEN"
    assert httpx.post(url, json=ONE_ITEM, headers={"Authorization": "alpha"}).status_code == 401  # no scheme
    for key in ("alpha", "from-file", "root"):  # a flag's key, the file's, and the admin key
        answer = httpx.post(url, json=ONE_ITEM, headers=bearer(key), timeout=60)
        assert answer.status_code == 200, (key, answer.text)
        assert answer.json()["items"][0]["dense"]["dims"] > 0
    assert httpx.get(f"{server.url}/v1/models").status_code == 401  # model listings too
    openai = httpx.post(f"{server.url}/v1/embeddings", json={"model": EMBEDDER, "input": "x"})
    assert openai.status_code == 401 and openai.headers["x-sie-error-code"] == "UNAUTHENTICATED"
    assert "Authorization" in openai.json()["error"]["message"]  # in OpenAI's envelope on its routes
    ollama = httpx.post(f"{server.url}/api/embed", json={"model": EMBEDDER, "input": "x"})  # Ollama's routes too
    assert ollama.status_code == 401 and "Authorization" in ollama.json()["error"]  # in Ollama's shape
    assert httpx.get(f"{server.url}/api/tags", headers=bearer("alpha")).status_code == 200
    for open_path in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
        assert httpx.get(f"{server.url}{open_path}").status_code == 200, open_path


def test_reload_takes_the_admin_key_only(server: ServerProcess) -> None:
    url = f"{server.url}/v1/models/{EMBEDDER}/reload"
    assert httpx.post(url).status_code == 401
    refused = httpx.post(url, headers=bearer("alpha"))
    assert refused.status_code == 403 and "admin key" in refused.json()["detail"]["message"]
    reloaded = httpx.post(url, headers=bearer("root"), timeout=60)
    assert reloaded.status_code == 200 and reloaded.json()["id"] == EMBEDDER
    # reading a model is not management: an API key reads it
    assert httpx.get(f"{server.url}/v1/models/{EMBEDDER}", headers=bearer("alpha")).status_code == 200


def test_one_key_past_its_limit_gets_429_while_another_is_served(server: ServerProcess) -> None:
    encode = f"{server.url}/v1/encode/{EMBEDDER}"
    endless = {"prompt": "count", "max_new_tokens": 400, "stream": True}
    with httpx.Client(timeout=60) as client:
        with client.stream("POST", f"{server.url}/v1/generate/{ENDLESS}", json=endless, headers=bearer("alpha")) as r:
            assert r.status_code == 200  # alpha now holds 1 of its 2 items until the stream ends
            two = {"items": [{"text": "a"}, {"text": "b"}]}
            limited = client.post(encode, json=two, headers=bearer("alpha"))
            assert limited.status_code == 429, limited.text
            assert limited.headers["x-sie-error-code"] == "RATE_LIMITED"
            assert limited.headers["retry-after"] == "1"
            assert "at most 2" in limited.json()["detail"]["message"]
            assert client.post(encode, json=two, headers=bearer("from-file")).status_code == 200  # another key
            assert client.post(encode, json=ONE_ITEM, headers=bearer("alpha")).status_code == 200  # within its 2
        # the stream is closed: alpha's items are released once the server sees the caller gone
        wait_until(
            lambda: client.post(encode, json=two, headers=bearer("alpha")).status_code == 200,
            timeout=30,
            message="alpha's items were never released after its stream closed",
        )
        alone = client.post(encode, json={"items": [{"text": t} for t in "abc"]}, headers=bearer("alpha"))
        assert alone.status_code == 400 and "Split the request" in alone.json()["detail"]["message"]


def test_the_sdk_sends_api_key_or_sie_api_key(server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIE_API_KEY", raising=False)
    with SIEClient(server.url, api_key="alpha") as client:
        assert len(client.encode(EMBEDDER, "hello")["dense"]) > 0
    with SIEClient(server.url) as client, pytest.raises(AuthenticationError) as missing:
        client.encode(EMBEDDER, "hello")
    assert missing.value.status_code == 401
    with SIEClient(server.url, api_key="nope") as client, pytest.raises(PermissionDeniedError):
        client.encode(EMBEDDER, "hello")
    monkeypatch.setenv("SIE_API_KEY", "from-file")
    endless = {"prompt": "count", "max_new_tokens": 400, "stream": True}
    with SIEClient(server.url) as client, httpx.Client(timeout=60) as raw:
        assert EMBEDDER in [m["id"] for m in client.list_models()]
        path = f"{server.url}/v1/generate/{ENDLESS}"
        with raw.stream("POST", path, json=endless, headers=bearer("from-file")) as held:
            assert held.status_code == 200
            with pytest.raises(RateLimitedError) as limited:
                client.encode(EMBEDDER, ["a", "b"])  # 1 held + 2 > 2
    assert limited.value.status_code == 429 and limited.value.retry_after == 1.0


@pytest.fixture(scope="module")
def closed_metrics(catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log = tmp_path_factory.mktemp("keys-metrics") / "server.log"
    env = {"SIE_API_KEYS": "one,two", "SIE_METRICS_NEED_KEY": "true"}
    proc = ServerProcess(catalog, "--offline", "--threads", "1", env=env, log=log)
    proc.wait_ready()
    try:
        yield proc
    finally:
        proc.stop()


def test_metrics_need_a_key_when_asked_and_keys_come_from_sie_api_keys(closed_metrics: ServerProcess) -> None:
    url = closed_metrics.url
    assert httpx.get(f"{url}/metrics").status_code == 401
    assert httpx.get(f"{url}/metrics", headers=bearer("three")).status_code == 403
    assert "sie_" in httpx.get(f"{url}/metrics", headers=bearer("two")).text
    assert httpx.get(f"{url}/healthz").status_code == 200 and httpx.get(f"{url}/readyz").status_code == 200
    assert httpx.get(f"{url}/v1/models", headers=bearer("one")).status_code == 200
    # no admin key set: management takes an API key
    assert httpx.post(f"{url}/v1/models/{EMBEDDER}/reload").status_code == 401
    assert httpx.post(f"{url}/v1/models/{EMBEDDER}/reload", headers=bearer("one"), timeout=60).status_code == 200


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "cannot read the key file"), ("# only a comment\n\n", "has no keys"), ("good\nhas space\n", "key 2 in")],
)
def test_a_bad_key_file_stops_the_server_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, expected: str
) -> None:
    path = tmp_path / "keys.txt"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "--api-key-file", str(path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--api-key-file" in err and expected in err


def test_a_key_that_cannot_travel_in_a_header_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--api-key", "two words"]) == 2
    assert "--api-key" in capsys.readouterr().err


def test_the_gateway_reads_sie_auth_tokens_as_its_keys() -> None:
    env = {"SIE_AUTH_TOKENS": "old-one,old-two"}
    args = cli.build_parser(env).parse_args(["gateway"])
    settings = read_settings(GatewaySettings, args, environ=env)
    assert settings.api_keys == ("old-one", "old-two") == settings.auth_tokens
    args = cli.build_parser({}).parse_args(["gateway", "--api-key", "new", "--admin-key", "root"])
    settings = read_settings(GatewaySettings, args, environ={})
    assert settings.api_keys == ("new",) and settings.admin_keys == ("root",)


def test_ecosystem_adapters_pass_api_key_through(server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    from sie_chroma import SIEEmbeddingFunction
    from sie_integrations_base import SIEBackend
    from sie_langchain import SIEEmbeddings
    from sie_llamaindex import SIEEmbedding
    from sie_qdrant import SIEVectorizer

    monkeypatch.delenv("SIE_API_KEY", raising=False)
    with pytest.raises(AuthenticationError):
        SIEBackend(EMBEDDER, base_url=server.url).embed(["hello"])
    assert len(SIEBackend(EMBEDDER, base_url=server.url, api_key="alpha").embed(["hello"])[0]) > 0
    langchain = SIEEmbeddings(model=EMBEDDER, base_url=server.url, api_key="alpha")
    assert len(langchain.embed_query("hello")) > 0
    assert "alpha" not in repr(langchain) and "alpha" not in str(langchain.model_dump())  # a secret, not a setting
    llama = SIEEmbedding(model=EMBEDDER, base_url=server.url, api_key="alpha")
    assert len(llama.get_text_embedding("hello")) > 0 and "alpha" not in llama.to_json()
    chroma = SIEEmbeddingFunction(EMBEDDER, server.url, api_key="from-file")
    assert len(chroma(["hello"])[0]) > 0 and "from-file" not in str(chroma.get_config())
    assert len(SIEVectorizer(EMBEDDER, base_url=server.url, api_key="alpha").embed_query("hello")) > 0
    monkeypatch.setenv("SIE_API_KEY", "alpha")  # and the variable, read when the client is made
    assert len(SIEEmbeddings(model=EMBEDDER, base_url=server.url).embed_query("hello")) > 0
