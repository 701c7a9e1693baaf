"""GLiNER entity extraction: labels from the request, spans with character offsets.

Long texts are cut into overlapping windows of words; each window is one queued item (its
cost is its real token count), and ``merge`` maps the windows' spans back onto their text and
drops the duplicates that overlapping windows find twice.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path
from typing import Any, NamedTuple

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import SpanExtractor
from sie_server.adapters.runtime.options import Entity, ExtractOptions, Span
from sie_server.adapters.runtime.torch_modules import module_bytes, release

_WORD = re.compile(r"\S+")
OVERLAP_WORDS = 32


class Window(NamedTuple):
    """A window's place in the request: which text it is from, where it starts there, and its text."""

    item: int
    offset: int
    text: str


class GlinerAdapter(SpanExtractor):
    model: Any = None

    def load(self, weights: Path) -> None:
        from gliner import GLiNER

        from sie_server.adapters.runtime.transformers_base import DTYPES

        # the profile's dtype (float16 on CUDA): gliner casts each tensor as it reads it, else it keeps float32
        dtype = DTYPES[self.profile.dtype] if self.profile.dtype != "float32" else None
        self.model = GLiNER.from_pretrained(str(weights), map_location=self.device, local_files_only=True, dtype=dtype)
        self.model.eval()
        self.window_words = min(self.config.max_sequence_length, int(getattr(self.model.config, "max_len", 384)))

    def unload(self) -> None:
        self.model = None
        release(self.device)

    def resident_bytes(self) -> int:
        return module_bytes(self.model)

    def warmup(self) -> None:
        self.run(self.windows(["Acme Corp sent an invoice."]), ExtractOptions(labels=("company",), threshold=0.5))

    def _token_budget(self) -> int:
        """Subword tokens a window may hold: the backbone's positions less room for the label prompt."""
        encoder = getattr(self.model.config, "encoder_config", None)
        positions = getattr(encoder, "max_position_embeddings", None) or 512
        max_labels = self.config.tasks.extract.max_labels if self.config.tasks.extract else 25
        return int(positions) - min(int(positions) // 4, 3 * max_labels + 4)

    def windows(self, texts: list[str]) -> list[Tokens]:
        """Each text as windows (``word_windows``) that also fit the backbone in subword tokens."""
        return word_windows(
            texts, self.model.data_processor.transformer_tokenizer, self.window_words, self._token_budget()
        )

    def run(self, batch: list[Tokens], options: ExtractOptions) -> list[list[Span]]:
        texts = [t.data.text for t in batch]
        found = self.model.inference(
            texts, list(options.labels), threshold=options.threshold, flat_ner=True, batch_size=len(texts)
        )
        return [
            [
                Span(text=e["text"], label=e["label"], score=float(e["score"]), start=e["start"], end=e["end"])
                for e in entities
            ]
            for entities in found
        ]

    def merge(self, texts: int, windows: list[Tokens], found: list[list[Span]]) -> list[list[Entity]]:
        return merge_windows(texts, [w.data for w in windows], found)


def word_windows(texts: list[str], tokenizer: Any, window_words: int, budget: int) -> list[Tokens]:
    """Each text as windows of at most ``window_words`` words that also fit ``budget`` subword tokens
    of ``tokenizer``, consecutive windows overlapping by OVERLAP_WORDS words (a quarter of a window at
    most). ``data`` is a ``Window``: (item index, character offset of the window, window text)."""
    out: list[Tokens] = []
    for index, text in enumerate(texts):
        words = list(_WORD.finditer(text))
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        starts = [start for start, end in encoded["offset_mapping"] if end > start]
        first = 0
        while first < len(words):
            last = min(len(words), first + window_words)
            while last - first > 1 and _count(starts, words[first].start(), words[last - 1].end()) > budget:
                last = first + max(1, (last - first) // 2)
            begin, end = words[first].start(), words[last - 1].end()
            window = text[begin:end]
            ids = tokenizer(window, add_special_tokens=True)["input_ids"]
            out.append(Tokens(list(ids), None, last - first < len(words), Window(index, begin, window)))
            if last == len(words):
                break
            first = max(first + 1, last - min(OVERLAP_WORDS, (last - first) // 4))
    return out


def _count(token_starts: list[int], begin: int, end: int) -> int:
    """Subword tokens starting in [begin, end)."""
    return bisect.bisect_left(token_starts, end) - bisect.bisect_left(token_starts, begin)


def merge_windows(texts: int, windows: list[Window], found: list[list[Span]]) -> list[list[Entity]]:
    """Each text's entities from its windows' spans: offsets moved from the window to the text, a span
    that overlapping windows both found (same start, end and label) kept once with its higher score,
    sorted by start and then best first."""
    best: list[dict[tuple[int, int, str], Entity]] = [{} for _ in range(texts)]
    for window, spans in zip(windows, found, strict=True):
        for span in spans:
            start, end = span["start"] + window.offset, span["end"] + window.offset
            key = (start, end, span["label"])
            kept = best[window.item].get(key)
            if kept is None or kept["score"] < span["score"]:
                best[window.item][key] = Entity(
                    text=span["text"], label=span["label"], score=span["score"], start=start, end=end, bbox=None
                )
    return [sorted(spans.values(), key=lambda e: (e["start"], -e["score"])) for spans in best]
