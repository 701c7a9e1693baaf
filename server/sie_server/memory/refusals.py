"""Why the pool refuses to load a model, as the ResourceExhausted a caller gets: more than the whole budget
(no retry), no room while the other models are busy or pinned, or too little free RAM on the machine."""

from __future__ import annotations

from sie_server.errors import ResourceExhausted
from sie_server.memory.budget import FREE_MARGIN_BYTES, mib

BUSY_RETRY_AFTER_S = 1.0
PRESSURE_RETRY_AFTER_S = 5.0


def beyond_budget(model_id: str, need: int, budget: int) -> ResourceExhausted:
    """The model needs more than the whole budget: nothing is evicted for it, and retrying will not help."""
    return ResourceExhausted(
        f"model {model_id} needs about {mib(need)} (weights + activation reserve for one "
        f"full batch), more than the whole memory budget of {mib(budget)}; nothing "
        "was evicted for it. Raise --memory-budget or lower the profile's max_batch_tokens.",
        retry_after=None,
    )


def no_room(model_id: str, need: int, free: int, untracked: int) -> ResourceExhausted:
    """``free`` of the budget is too little and the other resident models are busy or pinned."""
    beyond = (
        f" (the process holds {mib(untracked)} beyond its models' charges: caches and buffers no eviction frees)"
        if untracked
        else ""
    )
    return ResourceExhausted(
        f"model {model_id} needs about {mib(need)} but only {mib(free)} of the memory budget is free{beyond} and "
        "the other resident models are busy or pinned; retry shortly",
        retry_after=BUSY_RETRY_AFTER_S,
    )


def short_of_memory(model_id: str, need: int, free: int, budget: int) -> ResourceExhausted:
    """The budget has room but the machine's free memory (with what evicting frees) does not."""
    return ResourceExhausted(
        f"model {model_id} needs about {mib(need)} but only {mib(free)} of memory is available on "
        f"this machine (MemAvailable and what evicting idle models frees, keeping "
        f"{mib(FREE_MARGIN_BYTES)} free), although the memory budget of {mib(budget)} has "
        "room; not loading it, which would swap or be killed for memory. Free memory or lower "
        "--memory-budget; retry later",
        retry_after=PRESSURE_RETRY_AFTER_S,
    )
