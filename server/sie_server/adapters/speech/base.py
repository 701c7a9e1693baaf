"""The speech-to-text contract: one clip of mono 16 kHz audio in, its transcript out.

Each audio item is one queued item whose cost is its duration, one unit per second rounded up
(``SECONDS_PER_COST``), so a profile's ``max_batch_tokens`` bounds the seconds of audio in one batch
(an item longer than the budget runs alone). The answer is ``Found.data``: ``text``, ``language``,
``duration_ms``, ``segments`` (``start_ms``, ``end_ms``, ``text``), and ``words`` (the same fields)
when ``timestamp_granularities`` asks for "word".

Options (``params.options``; the config's ``tasks.extract.options`` are the defaults): ``language``
(an ISO 639-1 code; unset: detected), ``temperature`` (a number 0..1: sampling without fallback;
unset: the decoder's fallback schedule), ``beam_size`` (1..10), ``timestamp_granularities``
(a list of "segment", "word"), ``prompt`` (text the transcript continues: names, spelling).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import Encoder
from sie_server.adapters.runtime.media import Found
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.errors import InvalidInput

SAMPLE_RATE = 16_000  # what every Whisper model hears
SECONDS_PER_COST = 1.0
WINDOW_SECONDS = 30.0  # Whisper's window: longer audio is cut (voice activity, or windows) and stitched
OPTIONS = frozenset({"language", "temperature", "beam_size", "timestamp_granularities", "prompt"})
GRANULARITIES = frozenset({"segment", "word"})
MAX_BEAM = 10
MAX_PROMPT_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Clip:
    """Decoded audio: mono float32 samples at ``SAMPLE_RATE``."""

    samples: np.ndarray

    @property
    def seconds(self) -> float:
        return float(self.samples.size) / SAMPLE_RATE


def clip_cost(seconds: float) -> int:
    return max(1, math.ceil(seconds / SECONDS_PER_COST))


def clip_tokens(clip: Clip) -> Tokens:
    """The clip as a queued item: its cost in seconds, the samples as the payload."""
    return Tokens([0] * clip_cost(clip.seconds), None, False, clip)


class Stamp(TypedDict):
    start_ms: int
    end_ms: int
    text: str


def stamp(start_s: float, end_s: float, text: str) -> Stamp:
    return Stamp(start_ms=round(start_s * 1000), end_ms=round(end_s * 1000), text=text)


@dataclass(frozen=True, slots=True)
class SpeechSettings:
    language: str | None = None
    temperature: float | None = None
    beam_size: int = 5
    words: bool = False
    prompt: str | None = None


def speech_settings(options: MediaOptions, defaults: dict[str, Any]) -> SpeechSettings:
    """The request's options over the config's defaults, checked; InvalidInput names the bad one."""
    given = {**defaults, **options.settings()}
    unknown = sorted(set(given) - OPTIONS)
    if unknown:
        raise InvalidInput(f"unknown option {unknown[0]!r} for a speech model; it takes {sorted(OPTIONS)}")
    language = given.get("language")
    if language is not None and (
        not isinstance(language, str) or not 2 <= len(language) <= 3 or not language.isalpha()
    ):
        raise InvalidInput("params.options.language must be an ISO 639-1 code such as 'en'")
    temperature = given.get("temperature")
    if temperature is not None and (
        not isinstance(temperature, int | float) or isinstance(temperature, bool) or not 0 <= temperature <= 1
    ):
        raise InvalidInput("params.options.temperature must be a number from 0 to 1")
    beam = given.get("beam_size", 5)
    if not isinstance(beam, int) or isinstance(beam, bool) or not 1 <= beam <= MAX_BEAM:
        raise InvalidInput(f"params.options.beam_size must be an integer from 1 to {MAX_BEAM}")
    granularities = given.get("timestamp_granularities", ["segment"])
    if isinstance(granularities, str):
        granularities = [granularities]
    if not isinstance(granularities, list) or not set(granularities) <= GRANULARITIES:
        raise InvalidInput(f"params.options.timestamp_granularities must be a list of {sorted(GRANULARITIES)}")
    prompt = given.get("prompt")
    if prompt is not None and (not isinstance(prompt, str) or len(prompt) > MAX_PROMPT_CHARS):
        raise InvalidInput(f"params.options.prompt must be a text of at most {MAX_PROMPT_CHARS} characters")
    return SpeechSettings(
        language=language.lower() if language else None,
        temperature=None if temperature is None else float(temperature),
        beam_size=beam,
        words="word" in granularities,
        prompt=prompt or None,
    )


def transcript(
    text: str, language: str | None, seconds: float, segments: list[Stamp], words: list[Stamp] | None
) -> Found:
    data: dict[str, Any] = {
        "text": text.strip(),
        "language": language,
        "duration_ms": round(seconds * 1000),
        "segments": segments,
    }
    if words is not None:
        data["words"] = words
    return Found(data=data)


class SpeechToText(Encoder[MediaOptions]):
    """Clips in (``Tokens.data`` is a ``Clip``), one transcript (``Found``) per clip out."""

    options_type = MediaOptions
    #: whether it can time each word (``timestamp_granularities: ["word"]``)
    times_words: bool = True

    def settings(self, options: MediaOptions) -> SpeechSettings:
        extract = self.config.tasks.extract
        return speech_settings(options, dict(extract.options) if extract else {})

    def check(self, options: MediaOptions) -> None:
        """InvalidInput for a request this model cannot serve (an unknown option, word times it cannot give)."""
        if options.labels:
            raise InvalidInput(f"model {self.config.id} transcribes speech; it takes no params.labels")
        if self.settings(options).words and not self.times_words:
            raise InvalidInput(
                f"model {self.config.id} gives no word timestamps; params.options.timestamp_granularities "
                "may only ask for 'segment'"
            )

    def run(self, batch: list[Tokens], options: MediaOptions) -> list[Found]:
        settings = self.settings(options)
        return [self.transcribe(t.data, settings) for t in batch]

    @abstractmethod
    def transcribe(self, clip: Clip, settings: SpeechSettings) -> Found:
        """One clip's transcript."""

    def warmup(self) -> None:
        self.transcribe(Clip(np.zeros(SAMPLE_RATE, dtype=np.float32)), SpeechSettings(beam_size=1))
