"""The decode loop's pieces without a model: incremental detokenisers, batched sampling, stop strings."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import torch

from sie_server.adapters.runtime.generator import ByteDetokenizer, WindowDetokenizer
from sie_server.engine.sampling import sample, sample_rows
from sie_server.engine.sequences import SamplingParams, Sequence

TEXT = "Grüße, 東京! ok"
BYTES = list(TEXT.encode())  # one "token" per byte: multi-byte characters span several tokens


def by_bytes(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


def test_window_detokenizer_streams_whole_characters_only() -> None:
    detok = WindowDetokenizer(by_bytes)
    pieces = [detok.add(t) for t in BYTES]
    assert "".join(pieces) + detok.flush() == TEXT
    assert all("\ufffd" not in p for p in pieces)  # half a character is held back, never sent
    assert pieces[BYTES.index(0xC3)] == ""  # the first byte of "ü" alone gives nothing yet


def test_window_detokenizer_decodes_only_a_short_window() -> None:
    seen: list[int] = []

    def counting(ids: list[int]) -> str:
        seen.append(len(ids))
        return by_bytes(ids)

    detok = WindowDetokenizer(counting)
    for t in list(b"abcdefghij" * 20):
        detok.add(t)
    assert max(seen) <= 3  # not the whole 200-token answer at every step


def test_byte_detokenizer_joins_split_characters_and_flushes_a_broken_tail() -> None:
    detok = ByteDetokenizer(lambda t: bytes([t]))
    pieces = [detok.add(t) for t in BYTES]
    assert "".join(pieces) == TEXT and all("\ufffd" not in p for p in pieces)
    assert detok.add(0xE6) == "" and detok.flush() == "\ufffd"  # an unfinished character at the end is shown


def row(temperature: float = 0.0, top_p: float = 1.0, seed: int | None = None) -> Sequence:
    seq = Sequence([1, 2], SamplingParams(temperature=temperature, top_p=top_p, seed=seed))
    if seed is not None:
        seq.generator = torch.Generator().manual_seed(seed)
    return seq


def test_sample_greedy_rows_take_the_argmax_and_top_p_keeps_the_head() -> None:
    logits = torch.tensor([[0.0, 5.0, 1.0, 0.0], [3.0, 0.0, 0.0, 2.9], [0.0, 0.0, 9.0, 8.9]])
    rows = [row(), row(), row(temperature=1.0, top_p=0.01)]
    assert sample(logits, rows) == [1, 0, 2]  # top_p 0.01 leaves only the most likely token


def test_sample_a_top_p_below_the_dtypes_smallest_number_keeps_the_most_likely_token() -> None:
    # 5e-324 is 0 in float32: the nucleus must still hold the head (found by tests/server/test_fuzz.py)
    logits = torch.tensor([[0.0, 0.0, 9.0, 8.9], [1.0, 0.0, 0.0, 0.0]])
    rows = [row(temperature=1.0, top_p=5e-324), row(temperature=2.0, top_p=1e-300, seed=3)]
    assert sample(logits, rows) == [2, 0]


def test_sample_seeded_rows_repeat_whatever_else_is_in_the_batch() -> None:
    logits = torch.zeros(4, 1000)  # uniform: every draw is up to the generator
    alone = sample(logits[:1], [row(temperature=1.0, seed=11)])
    crowded = sample(logits, [row(), row(temperature=1.0), row(temperature=1.0, seed=11), row(temperature=0.5)])
    assert crowded[2] == alone[0] and crowded[0] == 0
    draws = {sample(logits[:1], [row(temperature=1.0)])[0] for _ in range(20)}
    assert len(draws) > 1  # unseeded rows do sample


def test_frequency_and_presence_penalties_lower_the_tokens_a_row_has_generated() -> None:
    logits = torch.tensor([[4.0, 3.0, 2.0, 0.0]] * 3)
    plain, by_count, by_presence = row(), row(), row()
    for seq in (plain, by_count, by_presence):
        seq.generated = [0, 0, 1]
    by_count.params = SamplingParams(frequency_penalty=0.8)  # 4 - 1.6 = 2.4, 3 - 0.8 = 2.2, 2: token 0 still
    by_presence.params = SamplingParams(presence_penalty=1.5)  # tokens 0 and 1 each once: 2.5, 1.5 against 2
    outcomes = sample_rows(logits.clone(), [plain, by_count, by_presence], "t/llm")
    assert outcomes == [0, 0, 0]
    by_count.params = SamplingParams(frequency_penalty=1.2)  # 4 - 2.4 = 1.6, 3 - 1.2 = 1.8, 2: token 2
    by_presence.params = SamplingParams(presence_penalty=2.5)  # 1.5, 0.5 against 2: token 2
    outcomes = sample_rows(logits.clone(), [plain, by_count, by_presence], "t/llm")
    assert outcomes == [0, 2, 2]  # and the row without penalties is untouched in the same batch


def test_stop_string_across_pieces_is_cut_and_never_streamed() -> None:
    seq = Sequence([1], SamplingParams(stop=("END",)))
    for piece in ["Hello E", "N", "D and more"]:
        seq.append(piece)
        if seq.finish_reason:
            break
    sent = []
    while not seq.deltas.empty():
        sent.append(seq.deltas.get_nowait())
    assert seq.text == "Hello " and seq.finish_reason == "stop"
    assert "".join(str(s) for s in sent) == "Hello "  # "E" and "EN" were held back, then dropped


def threads_started_by(work: Callable[[], object]) -> int:
    """OS threads that appeared in this process while ``work`` ran on a fresh thread (the thread itself not
    counted; threads that end meanwhile do not matter)."""
    started: list[int] = []

    def run() -> None:
        before = set(os.listdir("/proc/self/task"))
        work()
        started.append(len(set(os.listdir("/proc/self/task")) - before))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    return started[0]


def test_sampling_a_vocabulary_wide_batch_starts_no_openmp_team() -> None:
    """Sampling runs on the decode thread, between llama.cpp's steps: a torch kernel there would start an
    OpenMP team whose spinning worker takes a core from llama.cpp (one stream fell from ~100 to ~60 tokens/s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        logits = torch.randn(8, 49152)
        rows = [row(), row(temperature=0.7), row(temperature=1.0, top_p=0.9, seed=1), *[row() for _ in range(5)]]
        assert threads_started_by(lambda: logits.amax(-1)) == 1  # a torch reduction this wide does start one
        assert threads_started_by(lambda: sample_rows(logits, rows, "t/llm")) == 0
    finally:
        torch.set_num_threads(threads)
