"""The server's forward pass with no HTTP around it: C-like batches through the server's own adapter.

Mode C keeps one text per client in flight, so the server's batch former sees up to
``clients`` waiting texts at a time. Here the same former (``form_batch`` with the catalog
profile's limits) is replayed over the corpus in that way: ``clients`` texts wait, a batch
is taken, as many new texts arrive as left. The batches then run in this process through
the MiniLM adapter the server uses (float32, the same torch thread count), one after
another, with nothing else running. Their time per batch and per padded token is the
forward pass "without HTTP load" that the server's ``sie_batch_seconds`` (measured on its
lane thread while it serves) is compared with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from benchmarks._common import minilm_path
from tests.helpers.catalog import MINILM, REAL_CATALOG


@dataclass
class _Waiting:
    index: int
    cost: int
    enqueued_at: float


@dataclass
class ForwardAlone:
    batches: int
    items: int
    real_tokens: int
    padded_tokens: int
    seconds: float
    other_cores: float = 0.0  # other processes' load while it ran (set by the caller)

    @property
    def ms_per_batch(self) -> float:
        return 1000 * self.seconds / self.batches

    @property
    def us_per_padded_token(self) -> float:
        return 1e6 * self.seconds / self.padded_tokens


def c_like_batches(
    lengths: list[int], clients: int, max_batch_tokens: int, max_padding: float, min_batch_tokens: int
) -> list[list[int]]:
    """Corpus positions per batch, as the server's former takes them with ``clients`` texts in flight."""
    from sie_server.engine.batching import form_batch

    arrivals = iter(range(len(lengths)))
    clock = 0.0
    waiting: list[_Waiting] = []
    batches: list[list[int]] = []

    def arrive(count: int) -> None:
        nonlocal clock
        for index in [i for _, i in zip(range(count), arrivals, strict=False)]:
            clock += 1.0
            waiting.append(_Waiting(index, lengths[index], clock))

    arrive(clients)
    while waiting:
        batch = form_batch(waiting, max_batch_tokens, max_padding, min_batch_tokens)
        taken = {id(w) for w in batch}
        waiting[:] = [w for w in waiting if id(w) not in taken]
        batches.append([w.index for w in batch])
        arrive(len(batch))
    return batches


def forward_alone(texts: list[str], clients: int) -> ForwardAlone:
    """Run the corpus as C-like batches through the server's MiniLM adapter in this process."""
    from sie_server.adapters import create_adapter
    from sie_server.adapters.runtime.options import EncodeOptions
    from sie_server.catalog.loader import Catalog

    config = Catalog(REAL_CATALOG, {MINILM}).get(MINILM)
    assert config is not None
    profile = config.profile("cpu").model_copy(update={"cpu_precision": ["fp32"]})
    adapter = create_adapter(config, profile, "cpu")
    adapter.load(minilm_path())
    adapter.warmup()
    tokens = adapter.encode_tokens(texts, is_query=False, instruction=None)
    lengths = [t.length for t in tokens]
    plan = c_like_batches(
        lengths, clients, profile.max_batch_tokens, profile.max_padding_ratio, profile.min_batch_tokens
    )
    adapter.run([tokens[i] for i in plan[0]], EncodeOptions())  # one untimed batch
    seconds = 0.0
    for positions in plan:
        batch = [tokens[i] for i in positions]
        started = time.perf_counter()
        adapter.run(batch, EncodeOptions())
        seconds += time.perf_counter() - started
    padded = sum(max(lengths[i] for i in b) * len(b) for b in plan)
    result = ForwardAlone(len(plan), len(texts), sum(lengths), padded, seconds)
    adapter.unload()
    return result
