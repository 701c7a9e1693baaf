"""Run with the published `sie-crewai` 0.10.1 (on the published `sie-sdk` 0.10.1, Python 3.12) against a running
server: its reranker and extractor tools (through CrewAI's own `BaseTool.run`) and its sparse embedder; prints one
JSON report.

Usage: python published_crewai_check.py BASE_URL RANK_MODEL SPARSE_MODEL NER_MODEL QUERY PASSAGE...
"""

import json
import os
import re
import sys

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")  # this process only: CrewAI's telemetry stays off

import sie_crewai

base_url, rank_model, sparse_model, ner_model, query, *passages = sys.argv[1:]
report = {}
text = "Maria Lopez signed the contract with Acme Corp in Berlin."

ranked = sie_crewai.SIERerankerTool(base_url=base_url, model=rank_model).run(query=query, documents=passages, top_k=2)
lines = re.findall(r"^(\d+)\. \[Score: (-?[0-9.]+)\] (.*)$", ranked, flags=re.MULTILINE)
report["crewai_ranked"] = len(lines)
report["crewai_best"] = lines[0][2] if lines else None
scores = [float(score) for _, score, _ in lines]
report["crewai_scores_sorted"] = scores == sorted(scores, reverse=True)

labels = ["person", "organization"]
found = sie_crewai.SIEExtractorTool(base_url=base_url, model=ner_model, labels=labels).run(text=text)
entities = re.findall(r"^- (.*) \((\w+)\) \[confidence: [0-9.]+\]$", found, flags=re.MULTILINE)
report["crewai_extract_answered"] = found.startswith(("Extracted entities:", "No extraction results found"))
report["crewai_entities_ok"] = all(label in labels and span in text for span, label in entities)

sparse = sie_crewai.SIESparseEmbedder(base_url=base_url, model=sparse_model)
docs = sparse.embed_documents(passages[:2])
asked = sparse.embed_query(query)
report["crewai_sparse"] = [len(docs), all(len(d["indices"]) == len(d["values"]) > 0 for d in docs)]
report["crewai_sparse_query"] = len(asked["indices"]) > 0
print(json.dumps(report))
