"""What ``/v1/models`` says of a model from the catalog alone (state: available, nothing loaded).

The server overlays its live state (``engine/model_report.py``); the gateway overlays what its
workers report. No torch here: the gateway imports it.
"""

from __future__ import annotations

from sie_server.adapters.runtime.weights import describe
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.state_wire import ModelInfo, Precision, owner

AVAILABLE = "available"


def catalog_info(config: ModelConfig) -> ModelInfo:
    source, offline_ok = describe(config)
    encode = config.tasks.encode
    dims = encode.dims() if encode is not None else {}
    return ModelInfo(
        id=config.id,
        owned_by=owner(config.id),
        name=config.id,
        adapter=config.adapter,
        tasks=config.tasks.names(),
        inputs=config.inputs,
        outputs=encode.served_outputs() if encode else [],
        dims=dims,
        score_mode=config.tasks.score.mode if config.tasks.score else None,
        max_sequence_length=config.max_sequence_length,
        revision=config.source.revision,
        state=AVAILABLE,
        loaded=False,
        resident_bytes=0,
        charge_bytes=0,
        pinned=False,
        weights_source=source,
        available_offline=offline_ok,
        last_error=None,
        load_seconds=None,
        # what the cpu profile allows; once loaded, what it runs in and why (see adapters/runtime/precision.py)
        precision=Precision(running=None, allowed=list(config.profiles["cpu"].cpu_precision), reason=None, gate=[]),
    )
