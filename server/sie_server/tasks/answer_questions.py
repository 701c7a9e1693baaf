"""``answer_questions``: grounded QA over a few documents in one call. Chunk every document (files through
the document model), embed the passages and each question, shortlist by cosine, rerank the shortlist, and
answer only from the best passages; when the best rerank score is under ``min_score`` the answer is
"not in the documents" without generating, so that decision is deterministic."""

from __future__ import annotations

import numpy as np

from sie_server.api.service import Service
from sie_server.api.streaming import whole
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import (
    EncodeItemIn,
    EncodeParams,
    EncodeRequest,
    GenerateRequest,
    ItemIn,
    Message,
    ScoreRequest,
)
from sie_server.contract.tasks_wire import Answer, AnswerQuestionsRequest, AnswerQuestionsResponse, Passage
from sie_server.tasks.common import (
    CAPS,
    Chunk,
    check_count,
    check_file,
    check_text,
    chunks,
    models_for,
    parse_all,
    used,
)

NAME = "answer_questions"
TITLE = "Answer questions from documents"
DESCRIPTION = (
    "Answer questions only from the documents given (texts or base64 files): passages are embedded, "
    "shortlisted, reranked, and the language model answers from the best ones. Each answer lists the passages "
    "used with their document index, character offset and score, or says 'not in the documents'."
)
STEPS = ("embed", "rerank", "generate")
USES = (*STEPS, "document")  # the document model for files
NOT_FOUND = "not in the documents"
SYSTEM = (
    "Answer the question using only the numbered passages. Be brief. If the passages do not contain the answer, "
    f"reply exactly: {NOT_FOUND}."
)


def default_min_score(rerank: ModelConfig) -> float:
    mode = rerank.tasks.score.mode if rerank.tasks.score is not None else None
    return 0.3 if mode == "bi_encoder" else 0.0


async def _dense(svc: Service, model: ModelConfig, texts: list[str], query: bool, call: CallOptions) -> np.ndarray:
    rows: list[np.ndarray] = []
    step = svc.limits.max_items
    params = EncodeParams(output_types=["dense"], options={"is_query": True} if query else None)
    for at in range(0, len(texts), step):
        items = [EncodeItemIn(id=str(at + i), text=t) for i, t in enumerate(texts[at : at + step])]
        svc.limits.items(items, model)
        answer = await svc.encode(model, EncodeRequest(items=items, params=params), call)
        rows.extend(np.asarray(item.dense.values, dtype=np.float32) for item in answer.items if item.dense is not None)
    found = np.stack(rows)
    norms = np.linalg.norm(found, axis=1, keepdims=True)
    unit: np.ndarray = found / np.maximum(norms, 1e-12)
    return unit


async def _rerank(
    svc: Service, model: ModelConfig, question: str, shortlist: list[Chunk], call: CallOptions
) -> list[tuple[Chunk, float]]:
    query = ItemIn(id="query", text=question)
    items = [ItemIn(id=str(i), text=c.text) for i, c in enumerate(shortlist)]
    svc.limits.items(items, model)
    answer = await svc.score(model, ScoreRequest(query=query, items=items), call)
    return [(shortlist[int(s.item_id)], float(s.score)) for s in answer.scores]


async def _answer(
    svc: Service, model: ModelConfig, question: str, passages: list[Passage], tokens: int, call: CallOptions
) -> str:
    context = "\n\n".join(f"[{i + 1}] {p.text}" for i, p in enumerate(passages))
    messages = [
        Message(role="system", content=SYSTEM),
        Message(role="user", content=f"Passages:\n{context}\n\nQuestion: {question}"),
    ]
    request = GenerateRequest(messages=messages, max_new_tokens=tokens, temperature=0.0)
    for message in messages:
        svc.limits.text(message.content, "the task's prompt")
    stream = await svc.generate(model, request, call)
    await whole(stream, call)
    return stream.text.strip()


async def run(svc: Service, request: AnswerQuestionsRequest, call: CallOptions) -> AnswerQuestionsResponse:
    check_count(len(request.documents), CAPS.max_documents, "documents")
    check_count(len(request.questions), CAPS.max_questions, "questions")
    for i, source in enumerate(request.documents):
        if source.text is not None:
            check_text(source.text, f"documents[{i}].text")
        if source.file is not None:
            check_file(source.file, f"documents[{i}].file")
    for i, question in enumerate(request.questions):
        svc.limits.text(question, f"questions[{i}]")
    any_file = any(source.file is not None for source in request.documents)
    configs = await models_for(NAME, svc, STEPS + (("document",) if any_file else ()), request.models, uses=USES)

    files = [source.file for source in request.documents if source.file is not None]
    parsed = iter(await parse_all(svc, configs["document"], files, call) if files else [])
    texts = [source.text if source.text is not None else next(parsed).text for source in request.documents]
    check_text("".join(texts), "the documents' text")
    passages = [c for i, text in enumerate(texts) for c in chunks(i, text, request.chunk_chars)]
    check_count(len(passages), CAPS.max_chunks, "passages")
    if not passages:
        empty = [Answer(question=q, answer=NOT_FOUND, found=False, passages=[]) for q in request.questions]
        return AnswerQuestionsResponse(answers=empty, models=used(configs))

    vectors = await _dense(svc, configs["embed"], [p.text for p in passages], False, call)
    queries = await _dense(svc, configs["embed"], list(request.questions), True, call)
    floor = request.min_score if request.min_score is not None else default_min_score(configs["rerank"])
    answers = []
    for question, query in zip(request.questions, queries, strict=True):
        nearest = np.argsort(-(vectors @ query), kind="stable")[: request.shortlist]
        ranked = await _rerank(svc, configs["rerank"], question, [passages[int(k)] for k in nearest], call)
        best = [
            Passage(document=c.document, start=c.start, end=c.end, text=c.text, score=score)
            for c, score in ranked[: request.top_k]
        ]
        if not best or best[0].score < floor:
            answers.append(Answer(question=question, answer=NOT_FOUND, found=False, passages=[]))
            continue
        text = await _answer(svc, configs["generate"], question, best, request.max_new_tokens, call)
        found = NOT_FOUND not in text.lower()
        answers.append(Answer(question=question, answer=text if found else NOT_FOUND, found=found, passages=best))
    return AnswerQuestionsResponse(answers=answers, models=used(configs))
