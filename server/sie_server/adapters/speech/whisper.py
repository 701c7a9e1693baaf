"""Whisper through transformers (``WhisperForConditionalGeneration``: openai/whisper-large-v3-turbo and
its kin), for hub folders that are no CTranslate2 conversion.

Audio is cut into Whisper's 30 s windows; each window is generated with timestamps (greedy, or beam
search with ``beam_size``; ``temperature`` > 0 samples), decoded with its segment offsets, and the
segments are shifted by the window's start and stitched in order. Word timestamps are not given
(``timestamp_granularities: ["word"]`` is refused for this family: faster-whisper gives them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sie_server.adapters.runtime.media import Found
from sie_server.adapters.speech.base import (
    SAMPLE_RATE,
    WINDOW_SECONDS,
    Clip,
    SpeechSettings,
    SpeechToText,
    Stamp,
    stamp,
    transcript,
)

DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


class WhisperAdapter(SpeechToText):
    times_words = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model: Any = None
        self.processor: Any = None

    def load(self, weights: Path) -> None:
        import torch
        from transformers import WhisperForConditionalGeneration, WhisperProcessor

        dtype = getattr(torch, DTYPES[self.profile.dtype]) if self.device != "cpu" else torch.float32
        processor: Any = WhisperProcessor  # untyped
        loader: Any = WhisperForConditionalGeneration
        self.processor = processor.from_pretrained(str(weights))
        model = loader.from_pretrained(str(weights), dtype=dtype)
        self.model = model.to(self.device).eval()

    def unload(self) -> None:
        self.model = None
        self.processor = None

    def resident_bytes(self) -> int:
        if self.model is None:
            return 0
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    def _window(self, samples: Any, settings: SpeechSettings) -> list[dict[str, Any]]:
        import torch

        features = self.processor.feature_extractor(samples, sampling_rate=SAMPLE_RATE, return_tensors="pt")
        inputs = features.input_features.to(self.device, dtype=self.model.dtype)
        kwargs: dict[str, Any] = {"return_timestamps": True, "num_beams": settings.beam_size}
        if settings.language and self.model.generation_config.is_multilingual:
            kwargs["language"] = settings.language
        if settings.temperature:
            kwargs.update(do_sample=True, temperature=settings.temperature)
        if settings.prompt:
            kwargs["prompt_ids"] = torch.tensor(self.processor.get_prompt_ids(settings.prompt), device=self.device)
        with torch.inference_mode():
            ids = self.model.generate(inputs, **kwargs)
        decoded = self.processor.tokenizer.decode(ids[0], skip_special_tokens=True, output_offsets=True)
        offsets: list[dict[str, Any]] = decoded.get("offsets") or []
        if not offsets and decoded["text"].strip():
            offsets = [{"text": decoded["text"], "timestamp": (0.0, len(samples) / SAMPLE_RATE)}]
        return offsets

    def transcribe(self, clip: Clip, settings: SpeechSettings) -> Found:
        window = int(WINDOW_SECONDS * SAMPLE_RATE)
        segments: list[Stamp] = []
        for start in range(0, max(clip.samples.size, 1), window):
            piece = clip.samples[start : start + window]
            shift, length = start / SAMPLE_RATE, piece.size / SAMPLE_RATE
            for offset in self._window(piece, settings):
                begin, end = offset["timestamp"]
                # timestamps past the audio (the window's padding) are held to its end: segments stay within it
                begin = min(max(float(begin), 0.0), length)
                end = length if end is None else min(max(float(end), begin), length)
                if offset["text"].strip():
                    segments.append(stamp(shift + begin, shift + end, offset["text"].strip()))
        language = settings.language or ("en" if not self.model.generation_config.is_multilingual else None)
        return transcript(" ".join(s["text"] for s in segments), language, clip.seconds, segments, None)
