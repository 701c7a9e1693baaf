"""Every snippet in docs/integrations.md runs, against the test server (and the Weaviate fake).

The snippets name the catalog's cross-encoder and SmolLM2, whose weights are not here
offline; the test runs them with MiniLM (scoring as a bi-encoder) and the tiny LLM instead.
"""

from __future__ import annotations

import re

import pytest

from tests.helpers.server import REPO
from tests.integrations.models import MINILM, TINY_LLM
from tests.integrations.reopen import run_fresh
from tests.integrations.weaviate_fake import FakeWeaviateServer

DOC = (REPO / "docs" / "integrations.md").read_text()
SECTIONS = {
    match.group(1): match.group(2)
    for match in re.finditer(r"^## (\w+)\n(.*?)(?=^## |\Z)", DOC, flags=re.MULTILINE | re.DOTALL)
}


def snippet(section: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", SECTIONS[section], flags=re.DOTALL)
    assert len(blocks) == 1, f"{section}: expected one python snippet, found {len(blocks)}"
    return (
        blocks[0]
        .replace("cross-encoder/ms-marco-MiniLM-L-6-v2", MINILM)
        .replace("HuggingFaceTB/SmolLM2-135M-Instruct", TINY_LLM)
    )


@pytest.mark.parametrize("section", ["LangChain", "LlamaIndex", "Chroma", "Qdrant", "LanceDB"])
def test_snippet_runs(section: str, base_url: str) -> None:
    out = run_fresh(snippet(section), env={"SIE_URL": base_url})
    assert "Invoice INV-2024-0117" in out or "['invoice']" in out


def test_weaviate_snippet_runs_against_the_fake(base_url: str) -> None:
    code = snippet("Weaviate")
    assert "connect_to_local(port=8081, grpc_port=50051," in code
    with FakeWeaviateServer() as fake:
        code = code.replace(
            "connect_to_local(port=8081, grpc_port=50051,",
            f"connect_to_local(host='127.0.0.1', port={fake.http_port}, grpc_port={fake.grpc_port},",
        )
        out = run_fresh(code, env={"SIE_URL": base_url})
    assert out.startswith("Invoice INV-2024-0117")
