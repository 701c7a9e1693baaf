"""Finding a model for a job: ``GET /v1/models?task=...&output=...`` and ``sie-server models list
--task/--output`` keep the models that do a task and give an output type (both filters must hold)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from sie_server.contract.requests import OutputType
from sie_server.contract.state_wire import ModelInfo
from sie_server.errors import InvalidInput

TASKS = ("encode", "score", "extract", "generate")
OUTPUTS: tuple[str, ...] = get_args(OutputType)


@dataclass(frozen=True, slots=True)
class ModelFilter:
    task: str | None = None
    output: str | None = None

    @classmethod
    def parse(cls, task: str | None, output: str | None) -> ModelFilter:
        """The filter, or INVALID_INPUT naming the known values for an unknown one."""
        if task is not None and task not in TASKS:
            raise InvalidInput(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}")
        if output is not None and output not in OUTPUTS:
            raise InvalidInput(f"unknown output {output!r}; known output types: {', '.join(OUTPUTS)}")
        return cls(task, output)

    def matches(self, info: ModelInfo) -> bool:
        return (self.task is None or self.task in info.tasks) and (self.output is None or self.output in info.outputs)

    def apply(self, infos: list[ModelInfo]) -> list[ModelInfo]:
        return [info for info in infos if self.matches(info)]
