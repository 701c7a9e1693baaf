"""The README's pipeline: find what a company is owed, against one SIE server.

    parse   -> (with --from FILE) read a scanned invoice (PNG, JPEG) or a PDF into text
    encode  -> embed the passages and the question, find the nearest passages
    score   -> rerank them with a cross-encoder
    extract -> pull the amount and the due date out of the best passage
    generate-> answer in one sentence

Run `make serve` in another terminal, then `.venv/bin/python examples/invoice_pipeline.py`, or start
from a file: `.venv/bin/python examples/make_invoice_samples.py` writes a scanned invoice to
examples/data, and `... invoice_pipeline.py --from examples/data/invoice_scan.png` (or .pdf) parses it
first (PP-OCRv6 reads images and scanned pages; docling parses PDFs, DOCX and HTML) and uses its text
as the invoice passage.
Steps whose model is not available here (no download offline, or a task this server
does not offer yet) print what is missing; the script then exits with status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from sie_sdk import SIEClient, SIEConnectionError, SIEError, from_file
from sie_sdk.types import Item

EMBEDDER = os.environ.get("SIE_EMBEDDER", "sentence-transformers/all-MiniLM-L6-v2")
RERANKER = os.environ.get("SIE_RERANKER", "cross-encoder/ms-marco-MiniLM-L-6-v2")
EXTRACTOR = os.environ.get("SIE_EXTRACTOR", "urchade/gliner_multi-v2.1")
GENERATOR = os.environ.get("SIE_GENERATOR", "HuggingFaceTB/SmolLM2-135M-Instruct")
OCR = os.environ.get("SIE_OCR", "RapidAI/PP-OCRv6")
PARSER = os.environ.get("SIE_PARSER", "docling-project/docling")

QUESTION = "How much do we owe Acme Corp, and when is it due?"
TEXTS = {
    "invoice": "Invoice INV-2024-0117 from Acme Corp: 12 hours of consulting, total due 4,250.00 EUR by 31 March 2024.",
    "contract": "The master services agreement with Acme Corp renews every January "
    "and can be cancelled with 60 days notice.",
    "travel": "Our travel policy reimburses economy-class flights for trips shorter than six hours.",
    "report": "Acme Corp reported quarterly revenue growth of 8% in the EMEA region.",
    "cafeteria": "The cafeteria on the second floor serves lunch from 12:00 to 14:00 on weekdays.",
}


def parse(client: SIEClient, path: Path) -> str:
    """The file's text: an image read by the OCR model; a document parsed by docling (its scanned pages
    read by the OCR model), or by the OCR model where docling is not served here."""
    item = from_file(path, id=path.name)
    models = [OCR] if "images" in item else [PARSER, OCR]
    for k, model in enumerate(models):
        try:
            result = client.extract(model, item)
        except SIEError as exc:
            if k == len(models) - 1:
                raise
            print(f"0. parse   : {model} not available ({type(exc).__name__}); trying {models[k + 1]}")
            continue
        if "error" in result:
            raise SystemExit(f"cannot parse {path}: {result['error']['message']}")
        text = str(result["data"].get("text", ""))
        lines = len(result["entities"])
        print(f"0. parse   : {model} read {lines} lines from {path.name}:", " | ".join(text.splitlines()))
        return " ".join(text.split())
    raise AssertionError("unreachable")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", type=Path, help="a scanned invoice (PNG/JPEG) or a PDF to parse first")
    args = parser.parse_args()
    missing: list[str] = []
    with SIEClient(timeout=300) as client:
        texts = dict(TEXTS)
        if args.source is not None:
            texts["invoice"] = parse(client, args.source)
        passages = [Item(id=key, text=text) for key, text in texts.items()]
        # 1. encode: nearest passages by cosine similarity
        docs = client.encode(EMBEDDER, passages)
        query = client.encode(EMBEDDER, Item(text=QUESTION), is_query=True)
        similarity = np.stack([d["dense"] for d in docs]) @ query["dense"]
        top = [passages[i] for i in np.argsort(-similarity)[:3]]
        print("1. encode  :", [(p["id"], round(float(similarity[i]), 3)) for i, p in enumerate(passages)])

        # 2. score: rerank the candidates
        try:
            ranked = client.score(RERANKER, Item(text=QUESTION), top)
            best_id = ranked["scores"][0]["item_id"]
            print("2. score   :", [(s["item_id"], round(s["score"], 3)) for s in ranked["scores"]])
        except SIEError as exc:
            best_id = top[0]["id"]
            missing.append(f"score with {RERANKER}: {exc}")
            print(f"2. score   : skipped ({type(exc).__name__}); using the nearest passage")
        best = next(p for p in passages if p["id"] == best_id)
        print("   best    :", best["text"])

        # 3. extract: amount and due date
        try:
            entities = client.extract(EXTRACTOR, best, labels=["amount", "due date", "company"])
            print("3. extract :", [(e["label"], e["text"]) for e in entities["entities"]])
        except SIEError as exc:
            missing.append(f"extract with {EXTRACTOR}: {exc}")
            print(f"3. extract : skipped ({type(exc).__name__})")

        # 4. generate: a one-sentence answer
        try:
            prompt = f"Context: {best['text']}\nQuestion: {QUESTION}\nAnswer in one sentence."
            messages = [{"role": "user", "content": prompt}]
            answer = client.generate(GENERATOR, messages=messages, max_new_tokens=48)
            print("4. generate:", answer["text"].strip())
        except SIEError as exc:
            missing.append(f"generate with {GENERATOR}: {exc}")
            print(f"4. generate: skipped ({type(exc).__name__})")

    if missing:
        print("\nNot run here, and what it needs:", file=sys.stderr)
        for line in missing:
            print(f"  - {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SIEConnectionError as exc:
        print(f"cannot reach the SIE server ({exc}); start it with `make serve`", file=sys.stderr)
        sys.exit(2)
