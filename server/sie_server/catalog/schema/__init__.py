"""Pydantic schema of one model config (``configs/models/*.yaml``). Unknown keys are refused.

One module a part: ``weights`` (source, architecture), ``tasks``, ``runtime``, ``profile``, and ``model``, the
config as a whole. Import the names from here.
"""

from sie_server.catalog.schema.model import ModelConfig
from sie_server.catalog.schema.profile import CpuPrecision, GgufFormat, Profile
from sie_server.catalog.schema.runtime import Runtime
from sie_server.catalog.schema.strict import Strict
from sie_server.catalog.schema.tasks import (
    DenseSpec,
    EncodeTask,
    ExtractTask,
    GenerateTask,
    GuardFormat,
    MultivectorSpec,
    MuveraSpec,
    ScoreTask,
    SparseSpec,
    Tasks,
    ToolFormatName,
)
from sie_server.catalog.schema.weights import Architecture, Source

__all__ = [
    "Architecture",
    "CpuPrecision",
    "DenseSpec",
    "EncodeTask",
    "ExtractTask",
    "GenerateTask",
    "GgufFormat",
    "GuardFormat",
    "ModelConfig",
    "MultivectorSpec",
    "MuveraSpec",
    "Profile",
    "Runtime",
    "ScoreTask",
    "Source",
    "SparseSpec",
    "Strict",
    "Tasks",
    "ToolFormatName",
]
