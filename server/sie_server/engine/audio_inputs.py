"""Audio in: screened from its first bytes, then decoded to mono float32 at the model's rate.

Screening refuses before any decoding: bytes that are no audio (the common containers are sniffed from their
magic bytes: WAV, FLAC, MP3, Ogg, WebM, MP4/M4A, AIFF; anything else is what FFmpeg's own probe, through PyAV,
finds an audio stream in: AU, CAF, W64, WavPack, AMR, ... and a container with no audio stream is refused naming
it; ``pcm`` is raw 16-bit little-endian mono and needs ``sample_rate``), a WAV whose header declares more sample
bytes than the item holds (a 4 GB declaration in a 1 KB body) or a rate outside 1..384,000 Hz, and a WAV, FLAC or
AIFF whose header declares more than ``--max-audio-seconds``. Decoding (PyAV, FFmpeg's decoders) resamples as it
goes and stops as soon as the decoded audio passes the limit, so one item never holds more than
``max_audio_seconds x rate`` samples, whatever its header claimed.
"""

from __future__ import annotations

import io
import math
import struct
from dataclasses import dataclass

import numpy as np

from sie_server.contract.requests import MAX_SAMPLE_RATE
from sie_server.errors import InvalidInput

#: the containers sniffed from their first bytes (others: FFmpeg's probe, ``probe``)
FORMATS = ("wav", "flac", "mp3", "ogg", "webm", "mp4", "aiff", "pcm")
LIMIT_FLAG = "--max-audio-seconds"


@dataclass(frozen=True)
class Screened:
    """Audio that passed screening: its format and, when its header says, its duration in seconds."""

    data: bytes
    format: str
    seconds: float | None = None
    sample_rate: int | None = None  # pcm: the caller's rate


def sniff(data: bytes) -> str | None:
    """The audio container the bytes start with, or None."""
    head = data[:12]
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head[:4] == b"fLaC":
        return "flac"
    if head[:4] == b"OggS":
        return "ogg"
    if head[:3] == b"ID3" or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06):
        return "mp3"  # an ID3 tag, or an MPEG audio frame's sync word with a layer set
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "webm"
    if head[4:8] == b"ftyp":
        return "mp4"
    if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return "aiff"
    return None


def probe(data: bytes, where: str) -> str | None:
    """The container FFmpeg's probe (through PyAV) finds in ``data``, when it holds an audio stream; None when
    FFmpeg reads no container there; InvalidInput naming the container when it holds no audio."""
    import av

    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            name = str(container.format.name).split(",")[0]
            if not container.streams.audio:
                raise InvalidInput(f"{where} is not audio: FFmpeg reads it as '{name}', which holds no audio stream")
            return name
    except (av.error.FFmpegError, ValueError, EOFError):
        return None


def _seconds(seconds: float, where: str, max_seconds: float) -> float:
    if seconds > max_seconds:
        raise InvalidInput(
            f"{where} is {seconds:,.1f} s of audio; the limit is {max_seconds:,g} s ({LIMIT_FLAG}). "
            "Split the recording."
        )
    return seconds


def _rate(rate: int, where: str) -> int:
    if not 1 <= rate <= MAX_SAMPLE_RATE:
        raise InvalidInput(f"{where} declares a sample rate of {rate} Hz; it must be 1 to {MAX_SAMPLE_RATE:,}")
    return rate


def _wav_seconds(data: bytes, where: str, max_seconds: float) -> float:
    """Walk the RIFF chunks to ``data``: its declared size must be in the item, its duration within the limit."""
    offset, byte_rate = 12, 0
    while offset + 8 <= len(data):
        chunk, size = data[offset : offset + 4], struct.unpack_from("<I", data, offset + 4)[0]
        body = offset + 8
        if chunk == b"fmt ":
            if size < 16 or body + 16 > len(data):
                raise InvalidInput(f"{where} is a WAV whose fmt chunk is cut short")
            _, channels, rate, byte_rate, block, _ = struct.unpack_from("<HHIIHH", data, body)
            _rate(rate, where)
            if channels == 0 or block == 0 or byte_rate == 0:
                raise InvalidInput(f"{where} is a WAV declaring {channels} channels and {byte_rate} bytes a second")
        elif chunk == b"data":
            if byte_rate == 0:
                raise InvalidInput(f"{where} is a WAV with no fmt chunk before its data")
            present = len(data) - body
            if size > present:
                raise InvalidInput(
                    f"{where} is a WAV whose header declares {size:,} bytes of samples, but it holds {present:,}"
                )
            return _seconds(size / byte_rate, where, max_seconds)
        offset = body + size + (size & 1)  # chunks are padded to an even size
    raise InvalidInput(f"{where} is a WAV with no data chunk")


def _flac_seconds(data: bytes, where: str, max_seconds: float) -> float | None:
    """STREAMINFO, the first metadata block: the rate (20 bits) and the total samples (36 bits; 0: unknown)."""
    if len(data) < 4 + 4 + 18:
        raise InvalidInput(f"{where} is a FLAC stream cut short before its STREAMINFO")
    info = int.from_bytes(data[18:26], "big")
    rate = info >> 44
    total = info & ((1 << 36) - 1)
    _rate(rate, where)
    return _seconds(total / rate, where, max_seconds) if total else None


def _aiff_seconds(data: bytes, where: str, max_seconds: float) -> float:
    """AIFF's COMM chunk: sample frames (32 bits) over the rate (an 80-bit extended float)."""
    offset = 12
    while offset + 8 <= len(data):
        chunk, size = data[offset : offset + 4], struct.unpack_from(">I", data, offset + 4)[0]
        body = offset + 8
        if chunk == b"COMM":
            if size < 18 or body + 18 > len(data):
                raise InvalidInput(f"{where} is an AIFF whose COMM chunk is cut short")
            channels, frames = struct.unpack_from(">hI", data, body)
            exponent, mantissa = struct.unpack_from(">HQ", data, body + 8)
            rate = mantissa * 2.0 ** ((exponent & 0x7FFF) - 16383 - 63) if exponent & 0x7FFF else 0.0
            _rate(round(rate), where)
            if channels <= 0:
                raise InvalidInput(f"{where} is an AIFF declaring {channels} channels")
            return _seconds(frames / rate, where, max_seconds)
        offset = body + size + (size & 1)  # chunks are padded to an even size
    raise InvalidInput(f"{where} is an AIFF with no COMM chunk")


def screen(data: bytes, hint: str | None, sample_rate: int | None, where: str, max_seconds: float) -> Screened:
    """The item's audio, or InvalidInput naming what is wrong (before any decoding)."""
    where = f"{where}.audio"
    if not data:
        raise InvalidInput(f"{where} is empty")
    found = sniff(data)
    if found is None and (hint or "").lower() != "pcm":
        found = probe(data, where)
        if found is None:
            raise InvalidInput(
                f"{where} is not audio: no decoder here reads it (its bytes start as no WAV, FLAC, MP3, Ogg, WebM, "
                "MP4 or AIFF does, and FFmpeg finds no container in them); send raw samples as format 'pcm' with "
                "sample_rate"
            )
    if found is None:
        if sample_rate is None:
            raise InvalidInput(f"{where} is raw pcm: give its sample_rate")
        seconds = _seconds(len(data) / 2 / _rate(sample_rate, where), where, max_seconds)
        return Screened(data, "pcm", seconds, sample_rate)
    if found == "wav":
        return Screened(data, found, _wav_seconds(data, where, max_seconds))
    if found == "flac":
        return Screened(data, found, _flac_seconds(data, where, max_seconds))
    if found == "aiff":
        return Screened(data, found, _aiff_seconds(data, where, max_seconds))
    return Screened(data, found)


def decode(audio: Screened, rate: int, where: str, max_seconds: float) -> np.ndarray:
    """Mono float32 samples at ``rate``; decoding stops (InvalidInput) once it passes ``max_seconds``."""
    import av

    where = f"{where}.audio"
    limit = math.ceil(max_seconds * rate)
    resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
    pieces: list[np.ndarray] = []
    count = 0

    def take(frames: list[av.AudioFrame]) -> None:
        nonlocal count
        for frame in frames:
            samples = frame.to_ndarray().reshape(-1)
            count += samples.size
            if count > limit + rate:  # a second of slack: frames end past the exact limit
                _seconds(count / rate, where, max_seconds)
            pieces.append(samples.astype(np.float32, copy=False))

    try:
        if audio.format == "pcm":
            assert audio.sample_rate is not None
            ints = np.frombuffer(audio.data[: len(audio.data) // 2 * 2], dtype="<i2").reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(ints, format="s16", layout="mono")
            frame.sample_rate = audio.sample_rate
            take(resampler.resample(frame))
        else:
            with av.open(io.BytesIO(audio.data), mode="r") as container:
                if not container.streams.audio:
                    raise InvalidInput(f"{where} ({audio.format}) holds no audio stream")
                stream = container.streams.audio[0]
                if stream.duration is not None and stream.time_base is not None:
                    _seconds(float(stream.duration * stream.time_base), where, max_seconds)
                for frame in container.decode(stream):
                    take(resampler.resample(frame))
        take(resampler.resample(None))
    except InvalidInput:
        raise
    except (av.error.FFmpegError, ValueError, EOFError) as exc:
        raise InvalidInput(f"{where} could not be decoded as {audio.format}: {exc}") from None
    if not count:
        raise InvalidInput(f"{where} ({audio.format}) holds no samples")
    return np.concatenate(pieces)


def read_audio(
    data: bytes, hint: str | None, sample_rate: int | None, where: str, rate: int, max_seconds: float
) -> np.ndarray:
    """Screened and decoded (run off the event loop)."""
    return decode(screen(data, hint, sample_rate, where, max_seconds), rate, where, max_seconds)
