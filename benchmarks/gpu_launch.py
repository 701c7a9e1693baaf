"""What one GPU kernel launch costs the host, beside what the same kernels cost replayed from a CUDA graph, and a
pure-Python loop's time as a gauge of the host CPU: the bound under the GPU check's small-model figures (a
Qwen3-0.6B decode step is ~600 launches; see benchmarks/RESULTS.md, "GPU check").

    python -m benchmarks.gpu_launch          # on a machine with a CUDA torch; prints one table
"""

from __future__ import annotations

import statistics
import time
from typing import Any


def python_loop_ms(n: int = 2_000_000, repeats: int = 5) -> float:
    """Milliseconds of ``sum(range(n))`` (the median of ``repeats``): the host CPU's single-thread pace."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        sum(range(n))
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def launch_us(ops: int = 2000, repeats: int = 5) -> tuple[float, float]:
    """(µs per eager launch, µs per op replayed from a CUDA graph) of ``x.add_(1)`` on a one-element tensor,
    each the median of ``repeats`` timed runs of ``ops`` ops after a warm-up."""
    import torch

    x = torch.zeros(1, device="cuda")

    def eager() -> None:
        for _ in range(ops):
            x.add_(1)

    eager()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        eager()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        eager()
    graph.replay()
    torch.cuda.synchronize()

    def timed(fn: object) -> float:
        runs = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            started = time.perf_counter()
            fn()  # type: ignore[operator]
            torch.cuda.synchronize()
            runs.append((time.perf_counter() - started) / ops * 1e6)
        return statistics.median(runs)

    return timed(eager), timed(graph.replay)


def matmul_tflops(size: int = 8192, repeats: int = 10) -> float:
    import torch

    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        a @ b
    end.record()
    torch.cuda.synchronize()
    return 2 * size**3 * repeats / (start.elapsed_time(end) / 1000) / 1e12


def decode_steps(small: bool = False, steps: int = 16) -> tuple[list[tuple[str, str]], str]:
    """A Qwen3-0.6B-shaped model (random weights, bfloat16) decoding one row: ms per step with and without an
    attention mask passed in, and the profiler's top host-side ops of the masked steps."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import Qwen3Config, Qwen3ForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"
    size = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, head_dim=16)
    full = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, head_dim=128)
    config = Qwen3Config(vocab_size=151936, num_key_value_heads=8 if not small else 2, **(size if small else full))
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(torch.bfloat16).eval()
    ids = torch.randint(0, 1000, (1, 24), device=device)
    rows = []
    table = ""
    with torch.inference_mode():
        for masked, cudnn in ((True, True), (False, True), (True, False)):
            torch.backends.cuda.enable_cudnn_sdp(cudnn)  # the server turns it off (sie_server/device.py)
            mask = torch.ones_like(ids)
            out = model(input_ids=ids, attention_mask=mask if masked else None, use_cache=True)
            cache, token = out.past_key_values, ids[:, -1:]

            def step(masked: bool = masked, token: Any = token) -> None:
                nonlocal cache, mask
                mask = torch.cat([mask, mask.new_ones((1, 1))], dim=1)
                kwargs = {"attention_mask": mask} if masked else {}
                cache = model(input_ids=token, past_key_values=cache, use_cache=True, **kwargs).past_key_values

            for _ in range(3):
                step()
            if device == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(steps):
                step()
            if device == "cuda":
                torch.cuda.synchronize()
            per = (time.perf_counter() - started) / steps * 1000
            what = f"mask {'passed' if masked else 'none'}, cuDNN SDPA {'on' if cudnn else 'off'}"
            rows.append((f"Qwen3-0.6B decode step, 1 row, {what}, ms", f"{per:.1f}"))
            if masked and cudnn:
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    for _ in range(4):
                        step()
                table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12)
    return rows, table


def main() -> None:
    import torch

    loop = python_loop_ms()
    rows = [("python sum(range(2e6)), ms (host CPU pace)", f"{loop:.1f}")]
    if torch.cuda.is_available():
        eager, graph = launch_us()
        rows += [
            ("one eager kernel launch, µs (x.add_(1), 1 element)", f"{eager:.1f}"),
            ("the same op replayed from a CUDA graph, µs", f"{graph:.2f}"),
            ("bf16 8192^3 matmul, TFLOP/s", f"{matmul_tflops():.0f}"),
        ]
        device = torch.cuda.get_device_name(0)
    else:
        device = "no CUDA device"
    decode, table = decode_steps(small=not torch.cuda.is_available())
    rows += decode
    print(table)
    print(f"torch {torch.__version__}, {device}\n\n| measure | value |\n| --- | --- |")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
