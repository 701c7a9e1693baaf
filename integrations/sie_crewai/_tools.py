"""CrewAI tools on SIE: ``SIERerankerTool`` (documents ranked against a query by a score model) and
``SIEExtractorTool`` (entities, relations, classifications and objects from an extract model). Each
answers the agent in text, in the published ``sie-crewai`` tools' words; errors are the SDK's."""

from __future__ import annotations

from typing import Any, Literal

from crewai.tools import BaseTool
from pydantic import BaseModel, Field, PrivateAttr, SecretStr

from sie_integrations_base import DEFAULT_TIMEOUT_S, SIEBackend
from sie_sdk.errors import InvalidInputError

PREVIEW = 200  # characters of each ranked document shown to the agent


class _SIETool(BaseTool):
    """``model``; ``base_url`` (``None``: ``$SIE_URL``, else http://127.0.0.1:8080); ``priority``;
    ``timeout`` (seconds per call); ``api_key`` (``None``: ``$SIE_API_KEY``)."""

    model: str
    base_url: str | None = None
    priority: Literal["interactive", "batch"] | None = None
    timeout: float | None = DEFAULT_TIMEOUT_S
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)

    _backend: SIEBackend | None = PrivateAttr(default=None)

    @property
    def backend(self) -> SIEBackend:
        if self._backend is None:
            key = self.api_key.get_secret_value() if self.api_key is not None else None
            self._backend = SIEBackend(
                self.model, base_url=self.base_url, priority=self.priority, timeout=self.timeout, api_key=key
            )
        return self._backend


class RerankerInput(BaseModel):
    query: str = Field(..., description="The query to rank documents against.")
    documents: list[str] = Field(..., description="List of document texts to rerank.")
    top_k: int | None = Field(default=None, description="Number of top documents to return.")


class SIERerankerTool(_SIETool):
    """``run(query=..., documents=[...], top_k=None)``: the documents best first, each with its score."""

    name: str = "sie_reranker"
    description: str = (
        "Rerank a list of documents by their relevance to a query. Use this when you have multiple documents "
        "and need to find the most relevant ones. Input: query string and list of document texts. "
        "Output: ranked documents with scores."
    )
    args_schema: type[BaseModel] = RerankerInput

    def rank(self, query: str, documents: list[str], top_k: int | None = None) -> list[tuple[float, str]]:
        """(score, document) pairs, best first, at most ``top_k``."""
        return [(score, documents[i]) for i, score in self.backend.rank(query, documents, top_k=top_k)]

    def _run(self, query: str, documents: list[str], top_k: int | None = None) -> str:
        if not documents:
            return "No documents provided to rerank."
        lines = ["Ranked documents (most relevant first):"]
        for k, (score, doc) in enumerate(self.rank(query, documents, top_k), 1):
            preview = doc[:PREVIEW] + "..." if len(doc) > PREVIEW else doc
            lines.append(f"{k}. [Score: {score:.4f}] {preview}")
        return "\n".join(lines)


class ExtractorInput(BaseModel):
    text: str = Field(..., description="The text to extract entities from.")
    labels: list[str] | None = Field(
        default=None, description="Entity types to extract (e.g. ['person', 'organization']); default: the tool's."
    )


class SIEExtractorTool(_SIETool):
    """``run(text=..., labels=None)``: the entities (and relations, classifications, objects) found."""

    name: str = "sie_extractor"
    description: str = (
        "Extract named entities from text. Identifies people, organizations, locations, and other entity types. "
        "Input: text to analyze. Output: list of extracted entities with their types and confidence."
    )
    args_schema: type[BaseModel] = ExtractorInput
    labels: list[str] = Field(default=["person", "organization", "location"], description="Default labels.")
    threshold: float | None = None

    def extract(self, text: str, labels: list[str] | None = None) -> dict[str, Any]:
        """The model's answer for ``text``: ``entities``, ``relations``, ``classifications``, ``objects``."""
        result = self.backend.client.extract(
            self.model, {"text": text}, labels=labels or self.labels, threshold=self.threshold
        )
        error = result.get("error")
        if error is not None:
            raise InvalidInputError(error["message"], code=error["code"], status_code=400)
        return dict(result)

    def _run(self, text: str, labels: list[str] | None = None) -> str:
        chosen = labels or self.labels
        found = self.extract(text, chosen)
        lines: list[str] = []
        if found.get("entities"):
            lines.append("Extracted entities:")
            lines += [f"- {e['text']} ({e['label']}) [confidence: {e['score']:.2f}]" for e in found["entities"]]
        if found.get("relations"):
            lines.append("Extracted relations:")
            lines += [
                f"- {r.get('head', '')} --[{r.get('relation', '')}]--> {r.get('tail', '')} "
                f"[confidence: {r.get('score', 0.0):.2f}]"
                for r in found["relations"]
            ]
        if found.get("classifications"):
            lines.append("Classifications:")
            lines += [f"- {c['label']} [confidence: {c['score']:.2f}]" for c in found["classifications"]]
        if found.get("objects"):
            lines.append("Detected objects:")
            lines += [f"- {o['label']} at {o.get('bbox', [])} [confidence: {o['score']:.2f}]" for o in found["objects"]]
        return "\n".join(lines) if lines else f"No extraction results found for labels: {chosen}"
