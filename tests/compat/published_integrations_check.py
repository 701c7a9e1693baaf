"""Run with the published `sie-haystack` and `sie-dspy` 0.10.1 (on the published `sie-sdk` 0.10.1, Python 3.12)
against a running server: prints one JSON report.

Usage: python published_integrations_check.py BASE_URL EMBED_MODEL SPARSE_MODEL NER_MODEL QUERY PASSAGE...
"""

import json
import os
import sys

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy
import numpy as np
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
from haystack.components.writers import DocumentWriter
from haystack.document_stores.in_memory import InMemoryDocumentStore

import sie_dspy
import sie_haystack

base_url, embed_model, sparse_model, ner_model, query, *passages = sys.argv[1:]
report = {}
text = "Maria Lopez signed the contract with Acme Corp in Berlin."

# Haystack: index with the document embedder, then embed the query, retrieve and rerank in one pipeline
store = InMemoryDocumentStore()
indexing = Pipeline()
indexing.add_component("embed", sie_haystack.SIEDocumentEmbedder(base_url=base_url, model=embed_model))
indexing.add_component("write", DocumentWriter(store))
indexing.connect("embed", "write")
indexing.run({"embed": {"documents": [Document(content=p) for p in passages]}})
report["haystack_written"] = store.count_documents()
report["haystack_dims"] = len(store.filter_documents()[0].embedding)
querying = Pipeline()
querying.add_component("embed", sie_haystack.SIETextEmbedder(base_url=base_url, model=embed_model))
querying.add_component("retrieve", InMemoryEmbeddingRetriever(store, top_k=4))
querying.add_component("rank", sie_haystack.SIERanker(base_url=base_url, model=embed_model, top_k=2))
querying.connect("embed.embedding", "retrieve.query_embedding")
querying.connect("retrieve.documents", "rank.documents")
ranked = querying.run({"embed": {"text": query}, "rank": {"query": query}})["rank"]["documents"]
report["haystack_best"] = ranked[0].content
scores = [d.meta["score"] for d in ranked]  # the published ranker keeps its score in meta
report["haystack_scores_sorted"] = scores == sorted(scores, reverse=True)
sparse = sie_haystack.SIESparseTextEmbedder(base_url=base_url, model=sparse_model).run(text=query)["sparse_embedding"]
report["haystack_sparse"] = [len(sparse["indices"]) > 0, len(sparse["indices"]) == len(sparse["values"])]
found = sie_haystack.SIEExtractor(base_url=base_url, model=ner_model, labels=["person", "organization"]).run(text=text)
report["haystack_extract_keys"] = sorted(found)
report["haystack_entity_labels_ok"] = all(e.label in ("person", "organization") for e in found["entities"])

# DSPy: the embedder inside dspy.Embedder and dspy.retrievers.Embeddings, the reranker and extractor modules
embedder = sie_dspy.SIEEmbedder(base_url=base_url, model=embed_model)
report["dspy_shape"] = list(dspy.Embedder(embedder, caching=False)(passages).shape)
search = dspy.retrievers.Embeddings(corpus=passages, embedder=embedder, k=3)
report["dspy_best"] = search(query).passages[0]
reranked = sie_dspy.SIEReranker(base_url=base_url, model=embed_model)(query=query, passages=passages, k=2)
report["dspy_rerank_best"] = reranked.passages[0]
report["dspy_rerank_sorted"] = list(reranked.scores) == sorted(reranked.scores, reverse=True)
doc = sie_dspy.SIESparseEmbedder(base_url=base_url, model=sparse_model).embed_documents([passages[0]])[0]
report["dspy_sparse"] = [len(doc["indices"]) > 0, len(doc["indices"]) == len(doc["values"])]
extracted = sie_dspy.SIEExtractor(base_url=base_url, model=ner_model, labels=["person", "organization"])(text=text)
report["dspy_entities_are_spans"] = all(e["text"] in text for e in extracted.entities_dict)
report["dspy_unit_norm"] = bool(np.allclose(np.linalg.norm(embedder(passages), axis=1), 1.0, atol=1e-4))
print(json.dumps(report))
