"""Audio screening (before any decoding) and decoding under the duration bound."""

from __future__ import annotations

import numpy as np
import pytest

from sie_server.engine.audio_inputs import decode, read_audio, screen, sniff
from sie_server.errors import InvalidInput
from tests.helpers.speech import encoded, tone, wav, wav_declaring

RATE = 16_000


@pytest.mark.parametrize(
    ("container", "codec", "rate", "name"),
    [("flac", "flac", 44_100, "flac"), ("mp3", "libmp3lame", 44_100, "mp3"), ("ogg", "libopus", 48_000, "ogg")],
)
def test_each_container_is_sniffed_and_decoded_to_16k_mono(container: str, codec: str, rate: int, name: str) -> None:
    data = encoded(tone(2.0, rate=rate), rate, container, codec)
    assert sniff(data) == name
    samples = read_audio(data, None, None, "items[0]", RATE, 60)
    assert samples.dtype == np.float32 and abs(samples.size / RATE - 2.0) < 0.1  # resampled: 2 s at 16 kHz


def test_a_wav_is_resampled_and_its_declared_duration_read_before_decoding() -> None:
    data = wav(tone(1.5, rate=8_000), 8_000)
    screened = screen(data, "wav", None, "items[0]", 60)
    assert screened.format == "wav" and screened.seconds == pytest.approx(1.5)
    samples = decode(screened, RATE, "items[0]", 60)
    assert abs(samples.size - 1.5 * RATE) < 100
    # the tone survives: its strongest frequency is still 440 Hz
    spectrum = np.abs(np.fft.rfft(samples))
    assert abs(np.argmax(spectrum) * RATE / samples.size - 440) < 5


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"hello, this is text and not audio at all", "items[0].audio is not audio"),
        (b"", "items[0].audio is empty"),
        (wav_declaring(0xFFFFFFFF), "declares 4,294,967,295 bytes of samples, but it holds 1,024"),
        (wav_declaring(1024, rate=0), "declares a sample rate of 0 Hz; it must be 1 to 384,000"),
        (wav_declaring(1024, rate=10**9), "declares a sample rate of 1000000000 Hz"),
        (wav(tone(3.0), RATE), "is 3.0 s of audio; the limit is 2 s (--max-audio-seconds)"),
    ],
)
def test_bad_audio_is_refused_before_decoding(data: bytes, fragment: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        screen(data, None, None, "items[0]", 2)
    assert fragment in caught.value.message


def test_a_flac_header_over_the_limit_is_refused_from_its_streaminfo() -> None:
    data = encoded(np.zeros(RATE * 90, dtype=np.float32), RATE, "flac", "flac")
    assert len(data) < 100_000  # ninety seconds of silence is small: only the header tells
    with pytest.raises(InvalidInput, match=r"is 90.0 s of audio; the limit is 60 s"):
        screen(data, "flac", None, "items[0]", 60)


def test_decoding_stops_once_past_the_limit_when_no_header_says_the_duration() -> None:
    data = encoded(np.zeros(RATE * 20, dtype=np.float32), RATE, "mp3", "libmp3lame")
    screened = screen(data, None, None, "items[0]", 5)
    assert screened.seconds is None  # MP3 frames declare no total
    with pytest.raises(InvalidInput, match=r"s of audio; the limit is 5 s \(--max-audio-seconds\)"):
        decode(screened, RATE, "items[0]", 5)


def test_raw_pcm_needs_its_rate_and_is_resampled() -> None:
    ints = (tone(1.0, rate=48_000) * 32767).astype("<i2").tobytes()
    with pytest.raises(InvalidInput, match="raw pcm: give its sample_rate"):
        screen(ints, "pcm", None, "items[0]", 60)
    samples = read_audio(ints, "pcm", 48_000, "items[0]", RATE, 60)
    assert abs(samples.size - RATE) < 100


@pytest.mark.parametrize(
    ("container", "codec"),
    [("aiff", "pcm_s16be"), ("au", "pcm_s16be"), ("caf", "pcm_s16le"), ("w64", "pcm_s16le"), ("wv", "wavpack")],
)
def test_any_container_ffmpeg_decodes_is_taken_and_named(container: str, codec: str) -> None:
    """AIFF was a 400 while PyAV decodes it: what the decoder opens is taken, named by what FFmpeg calls it."""
    audio = tone(2.0, rate=44_100)
    data = encoded(audio, 44_100, container, codec)
    assert screen(data, None, None, "items[0]", 60).format == container
    samples = read_audio(data, None, None, "items[0]", RATE, 60)
    same = read_audio(wav(audio, 44_100), None, None, "items[0]", RATE, 60)
    # the same audio as its WAV: as long, as loud, the same tone
    assert abs(samples.size - same.size) <= RATE // 100
    assert np.sqrt(np.mean(samples**2)) == pytest.approx(np.sqrt(np.mean(same**2)), rel=0.02)
    assert abs(np.argmax(np.abs(np.fft.rfft(samples))) * RATE / samples.size - 440) < 5


def test_an_aiff_header_over_the_limit_is_refused_from_its_comm_chunk() -> None:
    data = encoded(np.zeros(RATE * 90, dtype=np.float32), RATE, "aiff", "pcm_s16be")
    screened = screen(data, None, None, "items[0]", 120)
    assert screened.format == "aiff" and screened.seconds == pytest.approx(90.0)
    with pytest.raises(InvalidInput, match=r"is 90.0 s of audio; the limit is 60 s"):
        screen(data, None, None, "items[0]", 60)


def test_a_container_without_audio_is_refused_naming_it() -> None:
    import io

    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, "PNG")
    with pytest.raises(InvalidInput) as caught:
        screen(png.getvalue(), None, None, "items[0]", 60)
    assert caught.value.message == (
        "items[0].audio is not audio: FFmpeg reads it as 'png_pipe', which holds no audio stream"
    )
