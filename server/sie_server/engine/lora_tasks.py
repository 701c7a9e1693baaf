"""Which task LoRA adapter an encode request runs with (jina-embeddings-v3: ``params.options.task``).

A model that lists ``runtime.lora_tasks`` runs every item with one of them: the request's, or the
role's default (queries ``query_lora_task``, documents ``doc_lora_task``). The task's instruction
(``runtime.task_prefixes``) is put before the text unless the request gives its own. A task the model
does not have, or a task for a model without adapters, is the caller's mistake (400).
"""

from __future__ import annotations

from typing import Any

from sie_server.catalog.schema import ModelConfig
from sie_server.errors import InvalidInput


def requested_task(options: dict[str, Any] | None) -> str | None:
    """``params.options.task`` as the caller sent it (a string), or None."""
    task = (options or {}).get("task")
    if task is not None and not isinstance(task, str):
        raise InvalidInput("params.options.task must be a string")
    return task


def lora_task(model: ModelConfig, requested: str | None, *, is_query: bool) -> str | None:
    """The adapter the items run with; None for a model without task adapters."""
    runtime = model.runtime
    if not runtime.lora_tasks:
        if requested is not None:
            raise InvalidInput(f"params.options.task: model {model.id} has no task adapters")
        return None
    if requested is None:
        return runtime.query_lora_task if is_query else runtime.doc_lora_task
    if requested not in runtime.lora_tasks:
        raise InvalidInput(
            f"params.options.task {requested!r} is not a task of model {model.id}; it has {runtime.lora_tasks}"
        )
    return requested


def task_instruction(model: ModelConfig, task: str | None, instruction: str | None) -> str | None:
    """The request's instruction, or else the task's own (None where it has none)."""
    if instruction or task is None:
        return instruction
    return model.runtime.task_prefixes.get(task) or None
