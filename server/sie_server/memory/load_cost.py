"""What loading a model will charge to the memory budget, from its files before it is read: its weights and
its reserve (activations for one full batch and the copies of read prompts, or llama.cpp's KV cache)."""

from __future__ import annotations

from pathlib import Path

from sie_server.adapters.generators.llamacpp_sizing import kv_cache_tokens
from sie_server.adapters.runtime.backends import effective_backend
from sie_server.adapters.runtime.locations import WeightsLocation
from sie_server.catalog.schema import ModelConfig, Profile
from sie_server.memory.estimate import activation_reserve, gguf_estimate, weights_bytes


def load_cost(location: WeightsLocation, config: ModelConfig, profile: Profile) -> tuple[int, int]:
    """(weights bytes, reserve bytes) of the model at ``location`` loaded with ``profile``."""
    folder = Path(location.path)
    if effective_backend(config, profile) == "llamacpp" and config.source.gguf_file:
        # llama.cpp allocates its whole KV cache at load: that is the reserve (with what its patched flash
        # attention keeps per thread, llamacpp_sizing.attention_cache_bytes), and it is exact; the copies
        # of read prompts' cells (adapters/generators/llamacpp_prefix.py) may grow to their cap beside it
        gguf, tokens = folder / config.source.gguf_file, kv_cache_tokens(profile)
        weights, kv = gguf_estimate(gguf, tokens, torch_prefill=bool(profile.torch_prefill_tokens))
        return weights, kv + profile.prefix_cache_bytes
    reserve = profile.activation_reserve_bytes
    if reserve is None:
        reserve = activation_reserve(folder, profile.max_batch_tokens, config.max_sequence_length, profile.dtype)
    if config.tasks.generate is not None and effective_backend(config, profile) == "transformers":
        reserve += profile.prefix_cache_bytes  # read prompts' keys and values (generators/torch_prefix.py)
    return weights_bytes(folder, profile.dtype), reserve
