"""RAG with LlamaIndex on SIE: a VectorStoreIndex, a reranking postprocessor, an LLM answer.

    .venv/bin/pip install -e ".[llamaindex]"
    make serve                              # another terminal
    .venv/bin/python examples/llamaindex_rag.py

Steps whose model this server does not serve print a skip message and the script goes on.
"""

from __future__ import annotations

from llama_index.core import VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.schema import TextNode
from rag_data import EMBEDDER, GENERATOR, PASSAGES, QUESTION, RERANKER, prompt, skipped

from sie_llamaindex import SIELLM, SIEEmbedding, SIENodePostprocessor
from sie_sdk import APIError


def main() -> None:
    # 1. index the notes (one node per note: no text splitter, so no tokenizer download)
    nodes = [TextNode(text=text, id_=f"note-{i}") for i, text in enumerate(PASSAGES)]
    index = VectorStoreIndex(nodes, embed_model=SIEEmbedding(model=EMBEDDER))
    candidates = index.as_retriever(similarity_top_k=5).retrieve(QUESTION)
    print("retrieved:", [hit.node.get_content()[:40] for hit in candidates])

    # 2. rerank
    try:
        best = SIENodePostprocessor(model=RERANKER, top_n=2).postprocess_nodes(candidates, query_str=QUESTION)
        print("reranked :", [(hit.node.get_content()[:40], round(hit.score or 0.0, 3)) for hit in best])
    except APIError as error:
        skipped("rerank", RERANKER, error)
        best = candidates[:2]
    print("best     :", best[0].node.get_content())

    # 3. answer
    llm = SIELLM(model=GENERATOR, num_output=64, temperature=0.0)
    question = ChatMessage(role=MessageRole.USER, content=prompt([hit.node.get_content() for hit in best]))
    try:
        reply = llm.chat([question])
    except APIError as error:
        skipped("answer", GENERATOR, error)
        return
    print("answer   :", reply.message.content)
    print("usage    :", reply.additional_kwargs["usage"])


if __name__ == "__main__":
    main()
