"""Audio the speech tests make: espeak-ng speaking a sentence, silence in any container, hostile headers."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np

SENTENCE = "The invoice total is four hundred dollars, due on Friday."


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


def speak(text: str = SENTENCE, speed: int = 160) -> bytes:
    """A WAV (22,050 Hz, 16-bit mono) of espeak-ng speaking ``text``."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "speech.wav"
        subprocess.run(["espeak-ng", "-s", str(speed), "-w", str(path), text], check=True, capture_output=True)
        return path.read_bytes()


def wav_seconds(wav: bytes) -> float:
    (byte_rate,) = struct.unpack_from("<I", wav, 28)
    return (len(wav) - 44) / int(byte_rate)


def encoded(samples: np.ndarray, rate: int, container: str, codec: str, bit_rate: int | None = None) -> bytes:
    """Mono float samples encoded with PyAV (flac, mp3, ogg/opus...)."""
    import av

    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=container) as out:
        stream = out.add_stream(codec, rate=rate, layout="mono")
        assert isinstance(stream, av.AudioStream)
        if bit_rate is not None:
            stream.bit_rate = bit_rate
        ints = (np.clip(samples, -1, 1) * 32767).astype("<i2").reshape(1, -1)
        step = rate  # a second a frame
        for start in range(0, ints.shape[1], step):
            frame = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(ints[:, start : start + step]), format="s16", layout="mono"
            )
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


def tone(seconds: float, rate: int = 16_000, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.2 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def wav(samples: np.ndarray, rate: int) -> bytes:
    ints = (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()
    assert isinstance(ints, bytes)
    header = b"RIFF" + struct.pack("<I", 36 + len(ints)) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    return header + b"data" + struct.pack("<I", len(ints)) + ints


def wav_declaring(data_bytes: int, rate: int = 16_000, present: int = 1024) -> bytes:
    """A WAV header whose data chunk declares ``data_bytes`` (4 GB: 0xFFFFFFFF) followed by ``present`` bytes."""
    header = b"RIFF" + struct.pack("<I", min(36 + data_bytes, 0xFFFFFFFF)) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    return bytes(header + b"data" + struct.pack("<I", data_bytes) + bytes(present))
