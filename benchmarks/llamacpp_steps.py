"""What batching can give on llama.cpp's CPU kernels: decode-step time of the server's llama.cpp adapter
(no server, no HTTP) for 1 sequence and for --streams sequences, on the packaged Q4_1 GGUF and on Q8_0
and Q4_0 copies of it made here with llama.cpp's own quantizer.

    .venv/bin/python -m benchmarks.llamacpp_steps [--threads 2] [--streams 8] [--steps 48] [--wait-quiet 30]

Each file's ceiling is (streams / step time at --streams) / (1 / step time at 1): what --streams
concurrent streams could reach over one stream if prompts cost nothing. The prompt (prefill) times
of both sizes are printed too. The Q8_0 and Q4_0 copies are not what the server serves (the catalog
reads the packaged Q4_1 as it is); they show which of llama.cpp's kernels batch.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._common import cpu_flags, cpu_model, wait_quiet
from benchmarks.generate_cpu import PROMPTS
from benchmarks.generate_llamacpp import GGUF, QUANTIZED, gguf_path, requantize


def measure(folder: Path, file: str, streams: int, steps: int) -> dict[int, tuple[float, int, float]]:
    """sequences -> (prefill seconds, prompt tokens, median decode-step seconds)."""
    from sie_server.adapters.generators.llamacpp import LlamaCppAdapter
    from sie_server.catalog.loader import parse_config_file
    from tests.helpers.catalog import SMOLLM, real_config_path

    config = parse_config_file(real_config_path(SMOLLM))
    config = config.model_copy(update={"source": config.source.model_copy(update={"gguf_file": file})})
    adapter = LlamaCppAdapter(config, config.profiles["cpu"], "cpu")
    adapter.load(folder)
    prompts = [adapter.prompt_ids(None, [{"role": "user", "content": p}]) for p in PROMPTS]
    prompts = (prompts * streams)[:streams]

    def run(n: int, count: int) -> tuple[float, int, float]:
        started = time.perf_counter()
        batch, logits = adapter.prefill(prompts[:n])
        prefill = time.perf_counter() - started
        made = [[int(t)] for t in logits.numpy().argmax(-1)]
        times = []
        for _ in range(count):
            positions = [len(prompts[r]) + len(made[r]) - 1 for r in range(n)]
            started = time.perf_counter()
            logits = adapter.decode(batch, [m[-1] for m in made], positions)
            times.append(time.perf_counter() - started)
            for row, token in enumerate(logits.numpy().argmax(-1)):
                made[row].append(int(token))
        adapter.discard(batch)
        return prefill, sum(len(p) for p in prompts[:n]), statistics.median(times)

    run(1, 4), run(streams, 4)  # warm-up
    figures = {n: run(n, steps) for n in (1, streams)}
    adapter.unload()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--wait-quiet", type=float, default=0.0)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)  # the adapter takes llama.cpp's thread count from torch's, as the server
    print(f"CPU {cpu_model()}, flags: {cpu_flags()}; threads {args.threads}; {wait_quiet(args.wait_quiet)}")
    with tempfile.TemporaryDirectory() as tmp:
        files = [(gguf_path().parent, GGUF, "Q4_1 (packaged)")]
        for name, ftype in QUANTIZED.items():
            target = Path(tmp) / GGUF.replace("Q4_1", name)
            requantize(target, ftype, args.threads)
            files.append((target.parent, target.name, f"{name} (requantized here)"))
        print(f"{'file':<22} {'step, 1 seq':>12} {f'step, {args.streams} seqs':>14} {'ceiling':>8}  prefill 1 / n")
        for folder, file, label in files:
            figures = measure(folder, file, args.streams, args.steps)
            (p1, t1, s1), (pn, tn, sn) = figures[1], figures[args.streams]
            ceiling = (args.streams / sn) / (1 / s1)
            print(
                f"{label:<22} {s1 * 1000:>9.1f} ms {sn * 1000:>11.1f} ms {ceiling:>7.2f}x  "
                f"{p1 * 1000:.0f} ms ({t1} tokens) / {pn * 1000:.0f} ms ({tn} tokens)"
            )


if __name__ == "__main__":
    main()
