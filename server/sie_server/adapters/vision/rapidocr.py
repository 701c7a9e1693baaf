"""PP-OCR (detection, angle classification, recognition) through RapidOCR on ONNX Runtime.

The ``rapidocr`` package carries the PP-OCRv6 detection and recognition weights and the angle
classifier (its ``models`` folder, the config's ``source.package``), so this model runs offline.
Each picture answers one entity per text line (``label: "line"``, the text, the recogniser's score,
the pixel box around the detector's quadrilateral) in reading order, and ``data.text``: the lines
joined by newlines in that order.

ONNX Runtime runs with as many intra-op threads as torch has (the server's ``--threads``), one
inter-op thread, and its workers do not spin between kernels, so they do not take cores from the
torch models beside it. A batch of one picture runs on that engine. A batch of several (callers'
pictures the shared queue put together, or a PDF's pages) is read side by side by ``--threads``
one-thread engines ("lanes"), each taking the next picture when it is done with one: ONNX Runtime's
kernels run no faster per picture in a batched call on CPU (measured in benchmarks/RESULTS.md), but
two one-thread sessions read more pages a second than one two-thread session. The lanes' weights are
charged to the budget with the main engine's.

The recogniser reads one line crop per call (``Rec.rec_batch_num: 1``): RapidOCR's default of 6
pads each group of crops to its widest, and on these CPUs that made pages 1.2-1.8x slower with the
same text read.

The detector's picture size and the page's orientation are settled in ``rapidocr_page.py``: small pictures are
enlarged as RapidOCR does, large ones bounded, and a page turned upside down or a quarter turn is read upright.

Options (``params.options``): ``text_score`` (lowest recognition score kept; default the request's
``threshold``, then the config's), ``box_thresh`` (lowest detection score of a text box).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.media import Found, MediaExtractor, Picture, line_entity, polygon_box, reading_order
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.adapters.vision.rapidocr_page import Recorder, fit_detector, page_turns, unturn_box
from sie_server.errors import InvalidInput

OPTIONS = frozenset({"text_score", "box_thresh"})


def ort_threads() -> int:
    """The server's compute threads (``--threads`` sets torch's): ONNX Runtime gets as many."""
    import torch

    return max(1, int(torch.get_num_threads()))


class RapidOcrAdapter(MediaExtractor):
    backend = "onnxruntime"
    option_names = OPTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.engine: Reader | None = None
        self.lanes: list[Reader] = []
        self._pool: ThreadPoolExecutor | None = None
        self._bytes = 0

    def load(self, weights: Path) -> None:
        threads = ort_threads()
        self.engine = _engine(weights, threads)
        if threads > 1:
            self.lanes = [_engine(weights, 1) for _ in range(threads)]
            self._pool = ThreadPoolExecutor(threads, thread_name_prefix="ocr-lane")
        model_bytes = sum(p.stat().st_size for p in weights.glob("*.onnx"))
        self._bytes = model_bytes * (1 + len(self.lanes))

    def unload(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.engine, self.lanes, self._pool = None, [], None

    def resident_bytes(self) -> int:
        return self._bytes if self.engine is not None else 0

    def check(self, options: MediaOptions) -> None:
        settings = options.settings()
        unknown = sorted(set(settings) - OPTIONS)
        if unknown:
            raise InvalidInput(f"unknown option {unknown[0]!r} for an OCR model; it takes {sorted(OPTIONS)}")
        for name, value in settings.items():
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
                raise InvalidInput(f"params.options.{name} must be a number from 0 to 1")

    def run(self, batch: list[Tokens], options: MediaOptions) -> list[Found]:
        settings = options.settings()
        text_score = settings.get("text_score", options.threshold)
        if text_score is None:
            text_score = self.config.tasks.extract.threshold if self.config.tasks.extract else 0.5
        box_thresh = settings.get("box_thresh")
        pictures = [t.data for t in batch]
        assert self.engine is not None, "run before load"
        if len(pictures) == 1 or self._pool is None:
            return [self.engine.read(p, float(text_score), box_thresh) for p in pictures]
        return self._side_by_side(pictures, float(text_score), box_thresh)

    def _side_by_side(self, pictures: list[Picture], text_score: float, box_thresh: float | None) -> list[Found]:
        """Each lane reads the next picture not yet taken until none is left; answers in batch order."""
        assert self._pool is not None
        found: list[Found | None] = [None] * len(pictures)
        taken = iter(range(len(pictures)))
        lock = threading.Lock()

        def lane_loop(reader: Reader) -> None:
            while True:
                with lock:
                    k = next(taken, None)
                if k is None:
                    return
                found[k] = reader.read(pictures[k], text_score, box_thresh)

        lanes = self.lanes[: len(pictures)]
        for done in [self._pool.submit(lane_loop, reader) for reader in lanes]:
            done.result()  # a lane's failure fails the batch, as one forward pass would
        return [f for f in found if f is not None]


def _engine(weights: Path, threads: int) -> Reader:
    """A RapidOCR engine on the package's weights with ``threads`` intra-op threads, sessions loaded."""
    from rapidocr import RapidOCR

    engine: Any = RapidOCR(
        params={
            "Global.log_level": "warning",
            "Global.model_root_dir": str(weights),
            "Rec.rec_batch_num": 1,
            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
    )
    # the sessions load on first use: load them now, so a load's cost and failures show at load
    engine._load_det_model()
    engine._load_cls_model()
    engine._load_rec_model()
    for stage in (engine.text_det, engine.text_cls, engine.text_rec):
        _no_spinning(stage)
    fit_detector(engine.text_det)
    return Reader(engine)


class Reader:
    """One RapidOCR engine, reading a picture the way up its text says it is."""

    def __init__(self, engine: Any):
        self.engine = engine
        self.recorder = Recorder(engine)

    def read(self, picture: Picture, text_score: float, box_thresh: float | None) -> Found:
        width, height = picture.size
        bgr = np.ascontiguousarray(np.asarray(picture.image)[:, :, ::-1])
        self.recorder.reset()
        out = self.engine(bgr, text_score=text_score, box_thresh=box_thresh)
        turns = page_turns(*self.recorder.votes())
        if turns:  # read again upright: every line the right way up, and in the page's own order
            out = self.engine(np.ascontiguousarray(np.rot90(bgr, turns)), text_score=text_score, box_thresh=box_thresh)
        if out.boxes is None or out.txts is None or out.scores is None:
            return Found(data={"text": ""})
        seen_w, seen_h = (height, width) if turns % 2 else (width, height)
        lines = [
            line_entity(text, float(score), polygon_box(box, seen_w, seen_h), picture.page)
            for box, text, score in zip(out.boxes, out.txts, out.scores, strict=True)
            if text.strip()
        ]
        lines = reading_order(lines)  # in the upright page's own frame
        for line in lines:
            if turns and line["bbox"] is not None:
                line["bbox"] = unturn_box(line["bbox"], turns, width, height)
        return Found(entities=lines, data={"text": "\n".join(e["text"] for e in lines)})


def _no_spinning(stage: Any) -> None:
    """Rebuild a stage's ONNX session with spinning off (RapidOCR's config has no key for it)."""
    from onnxruntime import InferenceSession

    session = getattr(getattr(stage, "session", None), "session", None)
    if not isinstance(session, InferenceSession):
        return
    options = session.get_session_options()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    stage.session.session = InferenceSession(
        session._model_path, sess_options=options, providers=session.get_providers()
    )
