"""Tesseract OCR (Debian's ``tesseract-ocr``) through ``pytesseract``: a second OCR engine for the
languages it has trained data for.

The config's ``source.path`` is the tessdata folder (Debian: ``/usr/share/tesseract-ocr/5/tessdata``).
Each picture answers one entity per text line (``label: "line"``; the words Tesseract grouped into
that line joined by spaces; ``score`` the mean word confidence from 0 to 1; the pixel box around the
line's words) in reading order, and ``data.text``.

Options (``params.options``): ``lang`` (e.g. ``eng``, ``deu+eng``: trained data in the tessdata
folder; default the config's), ``psm`` (page segmentation mode 0-13), ``min_confidence`` (0-1, words
below it are dropped; default the request's ``threshold``, then 0).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.media import Found, MediaExtractor, Picture, line_entity, pixel_box, reading_order
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.adapters.vision.rapidocr import ort_threads
from sie_server.errors import InvalidInput

OPTIONS = frozenset({"lang", "psm", "min_confidence"})
LANG = re.compile(r"^[A-Za-z_]+(\+[A-Za-z_]+)*$")


class TesseractAdapter(MediaExtractor):
    backend = "tesseract"
    option_names = OPTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tessdata: Path | None = None
        self.languages: frozenset[str] = frozenset()

    def load(self, weights: Path) -> None:
        import pytesseract

        try:
            pytesseract.get_tesseract_version()
        except pytesseract.TesseractNotFoundError:
            raise RuntimeError("the tesseract program is not installed (apt-get install tesseract-ocr)") from None
        languages = frozenset(p.name.removesuffix(".traineddata") for p in weights.glob("*.traineddata"))
        if not languages:
            raise RuntimeError(f"no *.traineddata in {weights} (apt-get install tesseract-ocr-eng)")
        # Tesseract's own OpenMP threads, in its child processes: no more than the server's --threads
        os.environ.setdefault("OMP_THREAD_LIMIT", str(ort_threads()))
        self.tessdata, self.languages = weights, languages

    def unload(self) -> None:
        self.tessdata = None

    def resident_bytes(self) -> int:
        return 0  # each picture is read by a tesseract process of its own

    def check(self, options: MediaOptions) -> None:
        settings = {**self._defaults(), **options.settings()}
        unknown = sorted(set(settings) - OPTIONS)
        if unknown:
            raise InvalidInput(f"unknown option {unknown[0]!r} for a Tesseract model; it takes {sorted(OPTIONS)}")
        lang = settings.get("lang", "eng")
        if not isinstance(lang, str) or not LANG.match(lang):
            raise InvalidInput("params.options.lang must name languages like 'eng' or 'deu+eng'")
        missing = sorted(set(lang.split("+")) - self.languages)
        if missing and self.tessdata is not None:
            raise InvalidInput(f"no trained data for {missing[0]!r} here; this model has {sorted(self.languages)}")
        psm = settings.get("psm", 3)
        if not isinstance(psm, int) or isinstance(psm, bool) or not 0 <= psm <= 13:
            raise InvalidInput("params.options.psm must be a page segmentation mode from 0 to 13")
        confidence = settings.get("min_confidence", 0)
        if not isinstance(confidence, int | float) or isinstance(confidence, bool) or not 0 <= confidence <= 1:
            raise InvalidInput("params.options.min_confidence must be a number from 0 to 1")

    def run(self, batch: list[Tokens], options: MediaOptions) -> list[Found]:
        settings = {**self._defaults(), **options.settings()}
        floor = settings.get("min_confidence", options.threshold or 0.0)
        return [self._read(t.data, str(settings.get("lang", "eng")), int(settings.get("psm", 3)), floor) for t in batch]

    def _defaults(self) -> dict[str, Any]:
        task = self.config.tasks.extract
        return dict(task.options) if task is not None else {}

    def _read(self, picture: Picture, lang: str, psm: int, floor: float) -> Found:
        import pytesseract

        width, height = picture.size
        words = pytesseract.image_to_data(
            picture.image,
            lang=lang,
            config=f'--psm {psm} --tessdata-dir "{self.tessdata}"',
            output_type=pytesseract.Output.DICT,
        )
        lines: dict[tuple[int, int, int], list[int]] = {}
        for k, text in enumerate(words["text"]):
            confidence = float(words["conf"][k]) / 100
            if text.strip() and confidence >= floor:
                lines.setdefault((words["block_num"][k], words["par_num"][k], words["line_num"][k]), []).append(k)
        entities = []
        for members in lines.values():
            left = min(words["left"][k] for k in members)
            top = min(words["top"][k] for k in members)
            right = max(words["left"][k] + words["width"][k] for k in members)
            bottom = max(words["top"][k] + words["height"][k] for k in members)
            text = " ".join(words["text"][k] for k in members)
            score = sum(float(words["conf"][k]) for k in members) / len(members) / 100
            entities.append(line_entity(text, score, pixel_box(left, top, right, bottom, width, height), picture.page))
        entities = reading_order(entities)
        return Found(entities=entities, data={"text": "\n".join(e["text"] for e in entities)})
