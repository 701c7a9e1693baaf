"""Time to the 400 for a chat that cannot fit the context (issue 24, "Bad input that costs CPU"):
SmolLM2-135M-Instruct's packaged GGUF on llama.cpp, a chat of N one-word turns to /v1/chat/completions.

    .venv/bin/python -m benchmarks.prompt_bounds [--turns 20000 50000] [--rounds 3] [--threads 2] [--largest] [--routes]
        [--bounded-only]

Two models in one server, same file, same threads: ``bounded`` is the catalog's SmolLM2, refused by the
prompt bounds (engine/prompt_bounds.py) before its template is rendered; ``unbounded`` is the same model
with the bounds switched off after load (no rendered roles, no bytes per token), so it renders and
tokenizes the whole chat and is refused once its tokens are counted, as every request was before the
bounds. Both answer the same 400. ``--largest`` adds one chat of one-word turns just under the default
64 MiB body limit (bounded only): what is left there is reading and validating the JSON body. ``--routes``
adds each ``--turns`` chat on the other chat routes and shapes (the model named last, as the OpenAI SDK writes
it; turns of text parts; Ollama's /api/chat; /v1/responses), bounded only; ``--bounded-only`` skips the
unbounded model, whose run takes minutes past ~100,000 turns.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks._common import cpu_flags_line, cpu_model
from sie_server.adapters.generators.llamacpp import LlamaCppAdapter
from sie_server.contract.limits import DEFAULT_MAX_BODY_BYTES
from tests.helpers.catalog import SMOLLM, copy_real, real_config, write_config
from tests.helpers.server import ServerProcess

UNBOUNDED = "bench/smollm-unbounded"


class UnboundedLlamaCpp(LlamaCppAdapter):
    """SmolLM2 on llama.cpp as it was before the prompt bounds: every prompt is rendered and tokenized."""

    def load(self, weights: Path) -> None:
        super().load(weights)
        self.max_token_bytes, self.rendered_roles = 0, frozenset()


def chat_body(model: str, turns: int) -> bytes:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "word"} for i in range(turns)]
    return json.dumps({"model": model, "messages": messages, "max_tokens": 8}).encode()


def time_to_refusal(client: httpx.Client, body: bytes, route: str = "/v1/chat/completions") -> tuple[float, str]:
    started = time.perf_counter()
    r = client.post(route, content=body, headers={"content-type": "application/json"})
    elapsed = time.perf_counter() - started
    assert r.status_code == 400 and r.headers["x-sie-error-code"] == "INVALID_INPUT", (r.status_code, r.text[:300])
    error = r.json()["error"]
    message: str = error if isinstance(error, str) else error["message"]  # Ollama's error shape, OpenAI's
    assert "context length of" in message, message
    return elapsed, message


def shapes(turns: int) -> list[tuple[str, str, int, bytes]]:
    """(route, what, turns, body): the same chat on each chat route, and with its turns' content as text parts."""
    plain = [{"role": "user" if i % 2 == 0 else "assistant", "content": "word"} for i in range(turns)]
    parts = [{**turn, "content": [{"type": "text", "text": "word"}]} for turn in plain]
    bodies: list[tuple[str, str, dict[str, Any]]] = [
        ("/v1/chat/completions", "model last (the OpenAI SDK's order)", {"messages": plain, "model": SMOLLM}),
        ("/v1/chat/completions", "content as text parts", {"model": SMOLLM, "messages": parts}),
        ("/api/chat", "Ollama", {"model": SMOLLM, "messages": plain, "stream": False, "options": {"num_predict": 8}}),
        ("/v1/responses", "Responses API", {"model": SMOLLM, "input": plain, "max_output_tokens": 8}),
    ]
    out = []
    for route, what, body in bodies:
        raw = json.dumps(body).encode()
        while len(raw) >= DEFAULT_MAX_BODY_BYTES:  # fewer turns, to stay under the body limit (text parts)
            turns_of = "input" if "input" in body else "messages"
            body = {**body, turns_of: body[turns_of][: len(body[turns_of]) * 9 // 10]}
            raw = json.dumps(body).encode()
        out.append((route, what, len(body["input" if "input" in body else "messages"]), raw))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[20_000, 50_000])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the bounded model (the unbounded runs once)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--largest", action="store_true", help="also a chat just under the 64 MiB body limit")
    parser.add_argument("--routes", action="store_true", help="also each --turns chat on the other routes and shapes")
    parser.add_argument("--bounded-only", action="store_true", help="no run without the bounds (minutes a chat)")
    args = parser.parse_args()
    print(f"CPU {cpu_model()}; {cpu_flags_line()}; server --threads {args.threads}")
    with tempfile.TemporaryDirectory() as folder:
        catalog = Path(folder)
        copy_real(catalog, SMOLLM)
        unbounded = real_config(SMOLLM)
        unbounded.update(id=UNBOUNDED, adapter="benchmarks.prompt_bounds:UnboundedLlamaCpp")
        write_config(catalog, unbounded)
        with (
            ServerProcess(catalog, "--offline", "--threads", str(args.threads), log=catalog / "s.log") as server,
            httpx.Client(base_url=server.url, timeout=600) as client,
        ):
            for model in (SMOLLM, UNBOUNDED):  # loaded before timing
                warm = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
                assert client.post("/v1/chat/completions", json=warm).status_code == 200
            for turns in args.turns:
                body = chat_body(SMOLLM, turns)
                bounded = [time_to_refusal(client, body) for _ in range(args.rounds)]
                now = statistics.median(t for t, _ in bounded)
                size = f"{turns:>7} turns ({len(body) / 1e6:.2f} MB)"
                if args.bounded_only:
                    print(f"{size}: bounds {now:.3f} s (median of {args.rounds})\n         bounds: {bounded[0][1]}")
                    continue
                before, before_message = time_to_refusal(client, chat_body(UNBOUNDED, turns))
                print(f"{size}: bounds {now:.3f} s (median of {args.rounds}), without them {before:.2f} s")
                print(f"         bounds: {bounded[0][1]}\n         without: {before_message}")
            for turns in args.turns if args.routes else []:
                for route, what, sent, body in shapes(turns):
                    took = [time_to_refusal(client, body, route)[0] for _ in range(args.rounds)]
                    each = " / ".join(f"{t:.3f}" for t in took)
                    print(f"{sent:>7} turns, {route} {what} ({len(body) / 1e6:.2f} MB): bounds "
                          f"{statistics.median(took):.3f} s (median of {args.rounds}: {each})")  # fmt: skip
            if args.largest:
                turns = (DEFAULT_MAX_BODY_BYTES - 1024) // len(b'{"role": "assistant", "content": "word"}, ')
                body = chat_body(SMOLLM, turns)
                assert len(body) < DEFAULT_MAX_BODY_BYTES
                took = [time_to_refusal(client, body)[0] for _ in range(args.rounds)]
                each = " / ".join(f"{t:.3f}" for t in took)
                print(
                    f"{turns:>7} turns ({len(body) / 1e6:.1f} MB, under the body limit): bounds "
                    f"{statistics.median(took):.3f} s (median of {args.rounds}: {each})"
                )


if __name__ == "__main__":
    main()
