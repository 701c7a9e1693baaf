"""Superlinked's published `sie-haystack`, `sie-dspy` and `sie-crewai` 0.10.1 work against this server unchanged:
Haystack pipelines (embed, write, retrieve, rerank), sparse vectors and extraction; DSPy's embedder, retriever,
reranker and extractor modules; CrewAI's reranker and extractor tools and its sparse embedder.

They run on the published `sie-sdk` 0.10.1 (Python 3.12) in `.venv-compat`, which `make test` creates
(CrewAI there without its whole stack: the modules `import crewai` needs, as the Makefile lists);
without them there the test is skipped and says why.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.catalog import MINILM, REPO, SPLADE_SMALL
from tests.helpers.invoice import INVOICE_PASSAGES, INVOICE_QUERY

COMPAT_PYTHON = REPO / ".venv-compat" / "bin" / "python"
SCRIPT = Path(__file__).with_name("published_integrations_check.py")
CREWAI_SCRIPT = Path(__file__).with_name("published_crewai_check.py")


def _installed(*packages: str) -> bool:
    if not COMPAT_PYTHON.exists():
        return False
    probe = [str(COMPAT_PYTHON), "-c", f"from importlib.metadata import version as v; [v(p) for p in {packages!r}]"]
    return subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode == 0


def _report(script: Path, args: list[str]) -> dict[str, object]:
    run = subprocess.run(
        [str(COMPAT_PYTHON), str(script), *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    return report


NO_HAYSTACK_DSPY = "no .venv-compat with sie-haystack and sie-dspy 0.10.1 (make test)"


@pytest.mark.skipif(not _installed("sie-haystack", "sie-dspy"), reason=NO_HAYSTACK_DSPY)
def test_published_haystack_and_dspy_integrations_0_10_1(base_url: str) -> None:
    passages = list(INVOICE_PASSAGES.values())
    report = _report(SCRIPT, [base_url, MINILM, SPLADE_SMALL, "test/tiny-gliner", INVOICE_QUERY, *passages])
    invoice = INVOICE_PASSAGES["invoice"]
    assert report["haystack_written"] == 5 and report["haystack_dims"] == 384
    assert report["haystack_best"] == invoice and report["haystack_scores_sorted"]
    assert report["haystack_sparse"] == [True, True]
    assert report["haystack_extract_keys"] == ["classifications", "entities", "objects", "relations"]
    assert report["haystack_entity_labels_ok"]
    assert report["dspy_shape"] == [5, 384] and report["dspy_unit_norm"]
    assert report["dspy_best"] == invoice and report["dspy_rerank_best"] == invoice and report["dspy_rerank_sorted"]
    assert report["dspy_sparse"] == [True, True] and report["dspy_entities_are_spans"]


@pytest.mark.skipif(not _installed("sie-crewai"), reason="no .venv-compat with sie-crewai 0.10.1 (make test)")
def test_published_crewai_integration_0_10_1(base_url: str) -> None:
    passages = list(INVOICE_PASSAGES.values())
    report = _report(CREWAI_SCRIPT, [base_url, MINILM, SPLADE_SMALL, "test/tiny-gliner", INVOICE_QUERY, *passages])
    assert report["crewai_ranked"] == 2 and report["crewai_scores_sorted"]
    assert report["crewai_best"] == INVOICE_PASSAGES["invoice"]
    assert report["crewai_extract_answered"] and report["crewai_entities_ok"]
    assert report["crewai_sparse"] == [2, True] and report["crewai_sparse_query"]
