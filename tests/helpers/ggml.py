"""ggml itself, from the llama.cpp wheel this project builds, through ctypes: for tests that run one of its ops
(a patched kernel) on arrays and compare the result bit for bit."""

from __future__ import annotations

import ctypes
from pathlib import Path


class InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


def load_ggml() -> ctypes.CDLL:
    """libggml-base with the calls every such test makes typed, and ``compute(ctx, graph, threads)`` from
    libggml-cpu; a test types the op it builds."""
    import llama_cpp

    lib = Path(llama_cpp.__file__).parent / "lib"
    base = ctypes.CDLL(str(lib / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(str(lib / "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
    base.ggml_init.restype, base.ggml_init.argtypes = ctypes.c_void_p, [InitParams]
    base.ggml_free.argtypes = [ctypes.c_void_p]
    base.ggml_new_graph.restype, base.ggml_new_graph.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    base.ggml_build_forward_expand.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    base.ggml_get_data.restype, base.ggml_get_data.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    cpu.ggml_graph_compute_with_ctx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    cpu.ggml_cpu_init()
    base.compute = cpu.ggml_graph_compute_with_ctx
    return base
