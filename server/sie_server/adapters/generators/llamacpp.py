"""Causal LMs on llama.cpp (extra ``llamacpp``): the GGUF file runs as it is, quantized, on the CPU.

One llama.cpp context per model holds every running sequence in one unified KV cache, each
under its own sequence id; the decode loop (engine/decode_loop.py) batches them exactly as it
batches the transformers path: a prefill for the sequences that join, then one decode call per
step with one token for each running sequence. The KV cache is sized to the profile's
``max_batch_tokens``, which is also what the loop lets the running sequences hold, so it never
overflows; its bytes are part of the model's charge in the memory budget.
"""

from __future__ import annotations

import collections.abc
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sie_server.adapters.generators import gguf_formats, torch_prefill_gate
from sie_server.adapters.generators.gguf_template import compile_template
from sie_server.adapters.generators.llamacpp_context import open_context
from sie_server.adapters.generators.llamacpp_prefix import FA_TILE_ROWS, chunks, restore, save, whole
from sie_server.adapters.generators.llamacpp_sizing import PREFILL_CHUNK, kv_cache_bytes
from sie_server.adapters.generators.llamacpp_tokens import VOCAB_LOCK, detokenize, piece, spans, tokenize
from sie_server.adapters.generators.llamacpp_torch import read_into
from sie_server.adapters.generators.torch_prefill import TorchPrefill, load_beside
from sie_server.adapters.runtime.generator import ByteDetokenizer, Detokenizer, Generator, PrefillSteps, run_steps
from sie_server.adapters.runtime.prefix_cache import PrefixCache
from sie_server.adapters.runtime.text_tokens import TokenSpan
from sie_server.adapters.runtime.token_bytes import fallback_chat, gguf_max_token_bytes, rendered_roles
from sie_server.errors import ModelLoadFailed

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"


@dataclass
class SeqBatch:
    """The running rows: the llama.cpp sequence id of each, in row order."""

    seq_ids: list[int]

    @property
    def rows(self) -> int:
        return len(self.seq_ids)


def check_gguf(path: Path) -> None:
    """A clear load error for a missing file or one that is not GGUF at all."""
    if not path.is_file():
        raise ModelLoadFailed(f"GGUF file {path} does not exist")
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise ModelLoadFailed(f"{path} is not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r})")


class LlamaCppAdapter(Generator):
    backend = "llamacpp"

    _model: Any = None
    _ctx: Any = None
    _vocab: Any = None
    _batch: Any = None
    _n_vocab: int = 0
    _kv_bytes: int = 0
    _model_bytes: int = 0
    _template: Any = None
    _template_text: str | None = None
    _grammar_vocab: Any = None
    _free_ids: list[int]
    prefix_cache: PrefixCache | None = None
    _bos_text: str = ""
    _eos_text: str = ""
    _torch: TorchPrefill | None = None  # long prompts' reader (torch_prefill.py), when the profile asks
    _torch_tokens: int = 0

    def load(self, weights: Path) -> None:
        import llama_cpp as llama

        assert self.config.source.gguf_file is not None, "schema: backend llamacpp needs source.gguf_file"
        path = Path(weights) / self.config.source.gguf_file
        check_gguf(path)
        threads = torch.get_num_threads()  # the server sets it from --threads
        chatter = logging.getLogger("llama-cpp-python")  # llama.cpp's own log lines, through its callback
        if chatter.level == logging.NOTSET:
            chatter.setLevel(logging.DEBUG if log.isEnabledFor(logging.DEBUG) else logging.WARNING)
        llama.llama_backend_init()
        path, self.precision_report = gguf_formats.choose(path, list(self.profile.gguf_formats), threads)
        model, ctx = open_context(path, self.profile, threads)
        self._model, self._ctx = model, ctx
        self.prefix_cache = PrefixCache(self.profile.prefix_cache_bytes, tail=FA_TILE_ROWS)
        self._torch_tokens = self.profile.torch_prefill_tokens or 0
        self._torch = load_beside(path, self.config.id) if self._torch_tokens else None
        self._vocab = llama.llama_model_get_vocab(model)
        self._n_vocab = int(llama.llama_vocab_n_tokens(self._vocab))
        self._free_ids = list(range(int(llama.llama_n_seq_max(ctx))))
        self._batch = llama.llama_batch_init(max(PREFILL_CHUNK, len(self._free_ids)), 0, 1)
        self.max_rows = len(self._free_ids)
        self.context_length = min(
            int(llama.llama_model_n_ctx_train(model)), self.config.max_sequence_length, self.profile.max_batch_tokens
        )
        self.eos_ids = frozenset(t for t in range(self._n_vocab) if llama.llama_vocab_is_eog(self._vocab, t))
        self._model_bytes = int(llama.llama_model_size(model))
        self._kv_bytes = kv_cache_bytes(
            int(llama.llama_n_ctx(ctx)),
            int(llama.llama_model_n_layer(model)),
            int(llama.llama_model_n_embd(model)),
            int(llama.llama_model_n_head(model)),
            int(llama.llama_model_n_head_kv(model)),
        )
        self._bos_text = self._token_text(int(llama.llama_vocab_bos(self._vocab)))
        self._eos_text = self._token_text(int(llama.llama_vocab_eos(self._vocab)))
        template = llama.llama_model_chat_template(model, None)
        self._template_text = template.decode() if template else None
        self._template = compile_template(self._template_text) if self._template_text else None
        # prompt bounds (engine/prompt_bounds.py): the bytes one token covers, the turns the template renders
        self.max_token_bytes = gguf_max_token_bytes(self._vocab, self._n_vocab)
        chat, marks = self._template, {"bos_token": self._bos_text, "eos_token": self._eos_text}

        def chat_text(messages: list[dict[str, str]]) -> str:  # as prompt_ids renders it
            if chat is None:
                return fallback_chat(messages)
            return str(chat.render(messages=messages, add_generation_prompt=True, **marks))

        self.rendered_roles = rendered_roles(chat_text)
        if self._torch is not None:
            self._gate_torch()
        log.info(
            "llama.cpp: %s, %d threads, KV cache %d tokens (%.1f MiB) for up to %d sequences",
            path.name,
            threads,
            llama.llama_n_ctx(ctx),
            self._kv_bytes / 2**20,
            self.max_rows,
        )

    def unload(self) -> None:
        import llama_cpp as llama

        with VOCAB_LOCK:  # no token_spans / detokenize reads the vocabulary while it is freed
            if self._batch is not None:
                llama.llama_batch_free(self._batch)
            if self._ctx is not None:
                llama.llama_free(self._ctx)
            if self._model is not None:
                llama.llama_model_free(self._model)
            self._batch = self._ctx = self._model = self._grammar_vocab = self._vocab = self._torch = None
        if self.prefix_cache is not None:
            self.prefix_cache.clear()

    def resident_bytes(self) -> int:
        """The weights as llama.cpp holds them (quantized). Its KV cache, allocated whole at load, is the
        model's reserve in the memory budget (``memory.estimate.gguf_estimate``), so it is not counted here."""
        if self._ctx is None:
            return 0
        return self._model_bytes + (self._torch.resident_bytes() if self._torch is not None else 0)

    def grammar_tokenizer(self) -> Any:
        if self._grammar_vocab is None:
            import llguidance.llamacpp

            self._grammar_vocab = llguidance.llamacpp.lltokenizer_from_vocab(
                self._vocab, n_vocab=self._n_vocab, eos_token=sorted(self.eos_ids) or None
            )
        return self._grammar_vocab

    @property
    def kv_bytes(self) -> int:
        return self._kv_bytes

    def warmup(self) -> None:
        batch, _ = self.prefill([self.prompt_ids("hello", None)])
        self.decode(batch, [self._first_eos()], [len(self.prompt_ids("hello", None))])
        self.discard(batch)

    # ----- prompts and text ---------------------------------------------------------------------
    def chat_template_text(self) -> str | None:
        return self._template_text

    def prompt_ids(
        self, prompt: str | None, messages: list[dict[str, Any]] | None, template_args: Mapping[str, Any] | None = None
    ) -> list[int]:
        if messages is None:
            return self._tokenize(prompt or "", add_special=True)
        if self._template is None:
            text = "\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\nassistant:"
            return self._tokenize(text, add_special=True)
        rendered = self._template.render(
            messages=messages,
            add_generation_prompt=True,
            bos_token=self._bos_text,
            eos_token=self._eos_text,
            **(template_args or {}),
        )
        return self._tokenize(rendered, add_special=False)

    def _tokenize(self, text: str, *, add_special: bool) -> list[int]:
        return tokenize(self._vocab, text, add_special=add_special)

    def _piece(self, token: int, *, special: bool = False) -> bytes:
        return piece(self._vocab, token, special=special)

    def _token_text(self, token: int) -> str:
        return self._piece(token, special=True).decode("utf-8", errors="replace") if token >= 0 else ""

    # the text tokenizer exposed (runtime/text_tokens.py's TextTokenizer): llama.cpp's own (llamacpp_tokens.py)
    def token_spans(self, texts: list[str], *, add_special_tokens: bool) -> list[list[TokenSpan]]:
        import llama_cpp as llama

        with VOCAB_LOCK:
            self._loaded()
            return [
                spans(t, self._tokenize(t, add_special=add_special_tokens), lambda k: self._piece(k, special=True),
                      lambda k: bool(llama.llama_vocab_is_control(self._vocab, k)))
                for t in texts
            ]  # fmt: skip

    def vocabulary_size(self) -> int:
        return self._n_vocab

    def detokenize(self, ids: list[list[int]], *, skip_special_tokens: bool) -> list[str]:
        import llama_cpp as llama

        with VOCAB_LOCK:
            self._loaded()
            return [detokenize(llama, self._vocab, row, skip_special_tokens=skip_special_tokens) for row in ids]

    def _loaded(self) -> None:
        if self._vocab is None:
            raise RuntimeError(f"model {self.config.id} was unloaded")

    def _first_eos(self) -> int:
        return min(self.eos_ids) if self.eos_ids else 0

    def detokenizer(self) -> Detokenizer:
        return ByteDetokenizer(self._piece)

    # ----- running ------------------------------------------------------------------------------
    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> torch.Tensor:
        """One llama_decode call: (token, position, sequence id, wants logits) per entry; the logits
        of the entries that want them, in order."""
        import llama_cpp as llama

        batch = self._batch
        for i, (token, pos, seq, wants) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = wants
        batch.n_tokens = len(entries)
        status = llama.llama_decode(self._ctx, batch)
        if status != 0:
            raise RuntimeError(f"llama_decode returned {status}")
        outputs = sum(1 for e in entries if e[3])
        if not outputs:
            return torch.empty((0, self._n_vocab))
        pointer = llama.llama_get_logits(self._ctx)
        logits = np.ctypeslib.as_array(pointer, shape=(outputs, self._n_vocab))
        return torch.from_numpy(logits.copy())

    def prefill(self, prompts: list[list[int]]) -> tuple[SeqBatch, torch.Tensor]:
        return run_steps(self.prefill_steps(prompts, PREFILL_CHUNK))

    def prefill_steps(self, prompts: list[list[int]], step_tokens: int) -> PrefillSteps:
        """Read the prompts together, each from where a cached prefix of it ends (llamacpp_prefix.py), the
        long ones by torch when the profile asks (torch_prefill.py), one equal to a cached prompt not at all
        (its cells and logits come back as they were); then keep a copy of each new prompt's cells and
        last logits for the prompts that will share it. With torch reading the long prompts, only those are cached
        and reused: a prefix read by one engine and the rest by the other would not give a cold read's logits.
        A step is one llama_decode call of at most ``step_tokens`` tokens (never cut below ``FA_TILE_ROWS``,
        so the bits are a whole read's) or one torch chunk."""
        if len(prompts) > len(self._free_ids):
            raise RuntimeError(f"{len(prompts)} new sequences but only {len(self._free_ids)} free sequence ids")
        seq_ids = [self._free_ids.pop() for _ in prompts]
        rows: list[torch.Tensor | None] = []
        entries: list[tuple[int, int, int, bool]] = []
        try:
            for prompt, seq in zip(prompts, seq_ids, strict=True):
                if self._by_torch(prompt):
                    rows.append((yield from self._torch_read(prompt, seq)))
                    continue
                if self._torch is None and (served := whole(self._ctx, self.prefix_cache, prompt, seq)) is not None:
                    rows.append(served)
                    continue
                rows.append(None)
                start = restore(self._ctx, self.prefix_cache, prompt, seq) if self._torch is None else 0
                entries += [(prompt[pos], pos, seq, pos == len(prompt) - 1) for pos in range(start, len(prompt))]
            parts = []
            for a, b in chunks(len(entries), min(step_tokens, PREFILL_CHUNK)):
                parts.append(self._decode(entries[a:b]))
                yield
        except BaseException:  # a failure, or the loop closed the steps before the end: the cells are freed
            self.discard(SeqBatch(seq_ids))
            raise
        read = iter(torch.cat(parts)) if parts else iter(())
        logits = torch.stack([row if row is not None else next(read) for row in rows])
        for prompt, seq, row in zip(prompts, seq_ids, logits, strict=True):
            if self._torch is None or self._by_torch(prompt):
                save(self._ctx, self.prefix_cache, prompt, seq, row)
        return SeqBatch(seq_ids), logits

    def _gate_torch(self) -> None:
        """Keep the torch reader only if it passes torch_prefill_gate.py here; the trial goes in the report."""
        tokenize = partial(self._tokenize, add_special=True)
        trial = torch_prefill_gate.run(self._probe, tokenize, self._torch_tokens, self.context_length, self.config.id)
        if self.precision_report is not None:
            self.precision_report = replace(self.precision_report, trials=(*self.precision_report.trials, trial))
        if trial.outcome != "chosen":
            self._torch = None

    def _probe(
        self, prompt: list[int], by_torch: bool, follow: list[int] | None
    ) -> tuple[np.ndarray, list[int], float]:
        """The gate's run (torch_prefill_gate.Run) on a sequence of its own, freed after."""
        seq = self._free_ids.pop()
        try:
            started = time.perf_counter()
            if by_torch:
                rows = [run_steps(self._torch_read(prompt, seq))]
            else:
                entries = [(token, pos, seq, pos == len(prompt) - 1) for pos, token in enumerate(prompt)]
                rows = [torch.cat([self._decode(entries[a:b]) for a, b in chunks(len(entries), PREFILL_CHUNK)])[0]]
            took, fed = time.perf_counter() - started, []
            for k in range(torch_prefill_gate.FOLLOW if follow is None else len(follow)):
                fed.append(int(rows[-1].argmax()) if follow is None else follow[k])
                rows.append(self._decode([(fed[-1], len(prompt) + k, seq, True)])[0])
        finally:
            self.discard(SeqBatch([seq]))
        return torch.stack(rows).numpy(), fed, took

    def _by_torch(self, prompt: list[int]) -> bool:
        return self._torch is not None and len(prompt) >= self._torch_tokens

    def _torch_read(self, prompt: list[int], seq: int) -> collections.abc.Generator[None, None, torch.Tensor]:
        assert self._torch is not None
        return read_into(self._ctx, self._torch, self.prefix_cache, prompt, seq)

    def decode(self, batch: SeqBatch, tokens: list[int], positions: list[int]) -> torch.Tensor:
        return self._decode([(t, p, s, True) for t, p, s in zip(tokens, positions, batch.seq_ids, strict=True)])

    def merge(self, first: SeqBatch | None, second: SeqBatch) -> SeqBatch:
        return second if first is None else SeqBatch(first.seq_ids + second.seq_ids)

    def keep(self, batch: SeqBatch, rows: list[int]) -> SeqBatch | None:
        kept = [batch.seq_ids[i] for i in rows]
        self.discard(SeqBatch([s for s in batch.seq_ids if s not in kept]))
        return SeqBatch(kept) if kept else None

    def discard(self, batch: SeqBatch) -> None:
        import llama_cpp as llama

        if self._ctx is None:
            return
        memory = llama.llama_get_memory(self._ctx)
        for seq in batch.seq_ids:
            llama.llama_memory_seq_rm(memory, seq, -1, -1)
            self._free_ids.append(seq)
