"""Run with the published `sie-sdk` 0.10.1 (Python 3.12) against a running server: its generate, stream_generate,
chat_completions and stream_chat_completions; prints one JSON report.

Usage: python published_generate_check.py BASE_URL LLM_MODEL
"""

import json
import sys

from sie_sdk import SIEClient

base_url, model = sys.argv[1:3]
report = {}
ask = [{"role": "user", "content": "Name a colour."}]
schema = {
    "type": "object",
    "properties": {"colour": {"enum": ["red", "green", "blue"]}},
    "required": ["colour"],
    "additionalProperties": False,
}
with SIEClient(base_url, timeout_s=120) as client:
    plain = client.generate(model, "The sky is", max_new_tokens=6, temperature=0.0, seed=1)
    report["generate"] = {
        "text": plain["text"],
        "finish_reason": plain.get("finish_reason"),
        "usage": dict(plain.get("usage") or {}),
        "keys": sorted(plain),
    }
    chunks = list(client.stream_generate(model, "The sky is", max_new_tokens=6, temperature=0.0, seed=1))
    # GenerateChunk as sie-sdk 0.10.1 types it: text_delta on each, done / finish_reason / usage on the last
    report["stream_generate"] = {
        "text": "".join(c["text_delta"] for c in chunks),
        "last": {k: v for k, v in chunks[-1].items() if k in ("done", "finish_reason", "usage")} if chunks else None,
        "done": [bool(c.get("done")) for c in chunks].count(True),
        "chunks": len(chunks),
    }
    yes_no = client.generate(model, "Is it blue?", max_new_tokens=4, grammar={"regex": "(yes|no)"})
    report["generate_grammar"] = yes_no["text"]
    chat = client.chat_completions(model, ask, max_completion_tokens=8, temperature=0.0, seed=1)
    report["chat"] = {
        "object": chat.get("object"),
        "content": chat["choices"][0]["message"]["content"],
        "role": chat["choices"][0]["message"]["role"],
        "finish_reason": chat["choices"][0].get("finish_reason"),
        "usage": dict(chat.get("usage") or {}),
    }
    shaped = client.chat_completions(
        model,
        ask,
        max_completion_tokens=24,
        response_format={"type": "json_schema", "json_schema": {"name": "colour", "schema": schema, "strict": True}},
    )
    report["chat_json"] = shaped["choices"][0]["message"]["content"]
    pieces = list(client.stream_chat_completions(model, ask, max_completion_tokens=8, temperature=0.0, seed=1))
    report["stream_chat"] = {
        "text": "".join(
            str((c.get("choices") or [{}])[0].get("delta", {}).get("content") or "") for c in pieces if c.get("choices")
        ),
        "objects": sorted({str(c.get("object")) for c in pieces}),
        "finish": [c["choices"][0].get("finish_reason") for c in pieces if c.get("choices")][-1:],
    }
print(json.dumps(report))
