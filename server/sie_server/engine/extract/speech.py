"""Extract from audio: each item's clip on the shared queue, one error per failed item.

An item's audio is screened and decoded off the event loop (``engine/audio_inputs.py``), then queued
as one item costed by its seconds (``adapters/speech/base.py``), batched with every other caller's
clips for the same model and options. Audio that is not audio, too long or undecodable fails its own
item; its neighbours are answered (as pictures are, ``engine/extract/pictures.py``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sie_server.adapters.runtime.options import MediaOptions
from sie_server.adapters.speech.base import SAMPLE_RATE, Clip, SpeechToText, clip_tokens
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.limits import Limits
from sie_server.contract.requests import ExtractRequest, ItemIn
from sie_server.engine.audio_inputs import read_audio
from sie_server.engine.extract.protocol import ExtractEngine, Outcome, PerItem, media_options
from sie_server.engine.extract.queue import Queue, adapter_of, decode_all, run
from sie_server.engine.outcomes import Timing
from sie_server.errors import InvalidInput, SIEError


@dataclass(frozen=True)
class AudioItem:
    """One extract item's audio: its bytes and the caller's format and sample-rate hints."""

    id: str
    data: bytes
    format: str | None = None
    sample_rate: int | None = None


async def extract_speech(
    service: Queue,
    model: ModelConfig,
    items: list[AudioItem | None],
    options: MediaOptions,
    call: CallOptions,
    limits: Limits,
    timing: Timing,
) -> list[Outcome]:
    """Each item's transcript, or its own error (an item without audio is refused by the limits first)."""
    adapter = await adapter_of(service, model, call, (SpeechToText,), "transcribe audio")
    adapter.check(options)
    prepared = await decode_all(timing, (_prepare(item, f"items[{k}]", limits) for k, item in enumerate(items)))
    clips = [(k, c) for k, c in enumerate(prepared) if isinstance(c, Clip)]
    answers = await run(service, model, [clip_tokens(c) for _, c in clips], options, call, timing, each=True)
    outcomes: list[Outcome] = [p if isinstance(p, SIEError) else InvalidInput("not transcribed") for p in prepared]
    for (k, _), answer in zip(clips, answers, strict=True):
        outcomes[k] = answer
    return outcomes


async def _prepare(item: AudioItem | None, where: str, limits: Limits) -> Clip | SIEError:
    if item is None:
        return InvalidInput(f"{where} has no audio")
    try:
        samples = await asyncio.to_thread(
            read_audio, item.data, item.format, item.sample_rate, where, SAMPLE_RATE, limits.max_audio_seconds
        )
    except SIEError as exc:
        return exc
    return Clip(samples)


def audio_item(item: ItemIn, item_id: str) -> AudioItem | None:
    """An item's audio for a speech model (None: it has none)."""
    audio = item.audio
    if audio is None:
        return None
    return AudioItem(id=item_id, data=audio.data, format=audio.format, sample_rate=audio.sample_rate)


@dataclass(frozen=True)
class SpeechRequest:
    """A speech model's request: each item's audio (None: it has none) and the request's options."""

    ids: list[str]
    items: list[AudioItem | None]
    options: MediaOptions


class Speech(PerItem[SpeechRequest]):
    """The speech kind: each item's transcript in ``data``, or that item's ``error``."""

    def decode(self, model: ModelConfig, request: ExtractRequest) -> SpeechRequest:
        options = media_options(request)
        ids = [item.id_at(k) for k, item in enumerate(request.items)]
        items = [audio_item(item, i) for item, i in zip(request.items, ids, strict=True)]
        return SpeechRequest(ids, items, options)

    async def queue(
        self, engine: ExtractEngine, model: ModelConfig, decoded: SpeechRequest, call: CallOptions, timing: Timing
    ) -> list[Outcome]:
        return await extract_speech(
            engine.inference, model, decoded.items, decoded.options, call, engine.limits, timing
        )


HANDLER = Speech()
