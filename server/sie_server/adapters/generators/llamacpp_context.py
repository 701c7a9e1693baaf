"""llama.cpp's model and its one context for a profile: every running sequence in one unified KV cache sized to
the profile's token budget (llamacpp_sizing.py), prompts read in chunks of ``PREFILL_CHUNK``, flash attention on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sie_server.adapters.generators.llamacpp_sizing import PREFILL_CHUNK, kv_cache_tokens
from sie_server.catalog.schema import Profile
from sie_server.errors import ModelLoadFailed

MAX_SEQUENCES = 64  # sequences one context decodes together


def model_params() -> Any:
    """llama.cpp's model parameters for every GGUF this server loads: on the CPU, weights in the plain CPU buffer,
    where this project's patched kernels run them (patches/llama.cpp). With extra buffer types a CPU with AMX
    repacks Q4_1 for ggml's AMX kernel, which crashed in ggml_backend_amx_mul_mat on an AMX Xeon here (every
    decode of SmolLM2's Q4_1, 2026-12-04)."""
    import llama_cpp as llama

    params = llama.llama_model_default_params()
    params.n_gpu_layers = 0
    params.use_extra_bufts = False
    return params


def open_context(path: Path, profile: Profile, threads: int) -> tuple[Any, Any]:
    """The GGUF file at ``path`` loaded on the CPU, and its context; ModelLoadFailed naming the file if either fails."""
    import llama_cpp as llama

    model = llama.llama_model_load_from_file(str(path).encode(), model_params())
    if not model:
        raise ModelLoadFailed(f"llama.cpp could not load the GGUF file {path} (truncated or unsupported)")
    ctx_params = llama.llama_context_default_params()
    ctx_params.n_ctx = kv_cache_tokens(profile)
    ctx_params.n_batch = PREFILL_CHUNK
    ctx_params.n_ubatch = PREFILL_CHUNK
    ctx_params.n_seq_max = min(MAX_SEQUENCES, int(llama.llama_max_parallel_sequences()))
    # logits are only read for each sequence's last token: room for one row per sequence, not per
    # token of a prefill chunk (512 x 49152 floats would be 96 MiB for SmolLM2)
    ctx_params.n_outputs_max = ctx_params.n_seq_max
    ctx_params.kv_unified = True  # every sequence may use any cell of the one cache
    ctx_params.n_threads = threads
    ctx_params.n_threads_batch = threads
    ctx_params.no_perf = True
    # flash attention: measured on this build (no OpenMP), SmolLM2 Q4_1, 2 threads, decode steps of
    # 1/8/16 sequences took 7.9/34.2/65.5 ms with it and 8.4/36.4/71.8 ms without; and its compute
    # buffer does not grow with the KV cache (no full KQ matrix for a 512-token prefill chunk)
    ctx_params.flash_attn_type = llama.LLAMA_FLASH_ATTN_TYPE_ENABLED
    ctx = llama.llama_init_from_model(model, ctx_params)
    if not ctx:
        llama.llama_model_free(model)
        raise ModelLoadFailed(f"llama.cpp could not create a context for {path} (out of memory?)")
    return model, ctx
