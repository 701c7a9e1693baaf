"""Finding the model a request names, and checking it does the task asked of it."""

from __future__ import annotations

from sie_server.catalog.loader import Catalog
from sie_server.catalog.schema import ModelConfig
from sie_server.errors import InvalidInput, ModelNotFound


def resolve(catalog: Catalog, model_id: str) -> ModelConfig:
    """The catalog entry for ``model_id``; MODEL_NOT_FOUND with the nearest id otherwise."""
    config = catalog.get(model_id)
    if config is None:
        hint = catalog.suggest(model_id)
        tip = f"; did you mean {hint}?" if hint else "; GET /v1/models lists the served models"
        raise ModelNotFound(f"model {model_id} is not in this server's catalog{tip}")
    return config


def require_task(config: ModelConfig, task: str) -> None:
    if task not in config.tasks.names():
        raise InvalidInput(f"model {config.id} does not support {task} (its tasks: {config.tasks.names()})")
