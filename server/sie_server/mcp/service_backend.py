"""The tools over the routes' own ``Service`` (the engine on a server, the queue on a gateway): each
tool builds the native request, runs the same checks as the native route, and calls the same
service method under the caller's call options (``X-SIE-Priority``, ``X-SIE-Timeout-Ms``)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sie_server.api.deadlines import within
from sie_server.api.routes.encode import check_dims, check_params
from sie_server.api.routes.generate import check as check_generate
from sie_server.api.service import Service
from sie_server.api.streaming import whole
from sie_server.catalog.schema import ModelConfig
from sie_server.contract import models
from sie_server.contract.headers import call_options
from sie_server.contract.requests import (
    DocumentIn,
    EncodeItemIn,
    EncodeParams,
    EncodeRequest,
    ExtractParams,
    ExtractRequest,
    GenerateRequest,
    ImageIn,
    ItemIn,
    Message,
    ScoreRequest,
)
from sie_server.contract.responses import EncodedItem
from sie_server.mcp.tools import (
    EncodeInput,
    EncodeOutput,
    ExtractInput,
    ExtractOutput,
    GenerateInput,
    GenerateOutput,
    ItemFailed,
    ListModelsOutput,
    ModelOut,
    Ranked,
    ScoreInput,
    ScoreOutput,
    SparseOut,
    UsageOut,
    Vectors,
    floats,
)


def vectors(item: EncodedItem) -> Vectors:
    sparse = multivector = None
    if item.sparse is not None:
        indices: list[int] = np.asarray(item.sparse.indices, dtype=np.int64).reshape(-1).tolist()
        sparse = SparseOut(indices=indices, values=floats(item.sparse.values))
    if item.multivector is not None:
        shape = (item.multivector.num_tokens, item.multivector.token_dims)
        multivector = np.asarray(item.multivector.values, dtype=np.float64).reshape(shape).tolist()
    dense = floats(item.dense.values) if item.dense is not None else None
    return Vectors(dense=dense, sparse=sparse, multivector=multivector)


class ServiceBackend:
    def __init__(self, service: Service):
        self.service = service

    def _model(self, model_id: str, task: str) -> ModelConfig:
        config = self.service.resolve(model_id)
        models.require_task(config, task)
        return config

    async def encode(self, args: EncodeInput, headers: Mapping[str, str]) -> EncodeOutput:
        config = self._model(args.model, "encode")
        options = {"is_query": True} if args.is_query else None
        params = EncodeParams(output_types=list(args.output_types), dims=args.dims, options=options)
        if args.images is not None:
            images = [ImageIn(data=m.data, format=m.format) for m in args.images]
            items = [EncodeItemIn(id=str(i), images=[image]) for i, image in enumerate(images)]
        else:
            items = [EncodeItemIn(id=str(i), text=t) for i, t in enumerate(args.texts or [])]
        request = EncodeRequest(items=items, params=params)
        self.service.limits.items(request.items, config)
        check_params(params)
        check_dims(config, args.dims, "dims")
        call = call_options(headers)
        async with within(call):
            answer = await self.service.encode(config, request, call)
        return EncodeOutput(model=answer.model, vectors=[vectors(item) for item in answer.items])

    async def score(self, args: ScoreInput, headers: Mapping[str, str]) -> ScoreOutput:
        config = self._model(args.model, "score")
        query = ItemIn(id="query", text=args.query)
        items = [ItemIn(id=str(i), text=t) for i, t in enumerate(args.documents)]
        self.service.limits.item(query, "query", config)
        self.service.limits.items(items, config)
        call = call_options(headers)
        async with within(call):
            answer = await self.service.score(config, ScoreRequest(query=query, items=items), call)
        results = [Ranked(index=int(s.item_id), score=s.score, rank=s.rank) for s in answer.scores]
        return ScoreOutput(model=answer.model, results=results)

    async def extract(self, args: ExtractInput, headers: Mapping[str, str]) -> ExtractOutput:
        config = self._model(args.model, "extract")
        item = ItemIn(
            id="0",
            text=args.text,
            document=DocumentIn(data=args.document.data, format=args.document.format) if args.document else None,
            images=[ImageIn(data=args.image.data, format=args.image.format)] if args.image else None,
        )
        self.service.limits.items([item], config)
        params = ExtractParams(labels=args.labels, threshold=args.threshold, options=args.options)
        call = call_options(headers)
        async with within(call):
            answer = await self.service.extract(config, ExtractRequest(items=[item], params=params), call)
        found = answer.items[0]
        if found.error is not None:  # this item alone failed (a corrupt file): the tool's error, with its code
            raise ItemFailed(found.error.code, found.error.message)
        extracted = found.model_dump(include={"entities", "relations", "classifications", "objects", "data"})
        return ExtractOutput.model_validate({"model": answer.model, **extracted})

    async def generate(self, args: GenerateInput, headers: Mapping[str, str]) -> GenerateOutput:
        config = self._model(args.model, "generate")
        messages = [Message(role=m.role, content=m.content) for m in args.messages] if args.messages else None
        request = GenerateRequest(
            prompt=args.prompt,
            messages=messages,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            stop=args.stop,
            seed=args.seed,
            grammar=args.constraint(),
        )
        check_generate(request, self.service.limits)
        call = call_options(headers)
        async with within(call):
            stream = await self.service.generate(config, request, call)
        await whole(stream, call)
        usage = UsageOut.model_validate(stream.usage.model_dump())
        return GenerateOutput(model=stream.model, text=stream.text, finish_reason=stream.finish_reason, usage=usage)

    async def list_models(self, headers: Mapping[str, str]) -> ListModelsOutput:
        infos, _cpu = await self.service.models()
        return ListModelsOutput(
            models=[ModelOut(id=i.id, tasks=i.tasks, inputs=i.inputs, dims=i.dims, state=i.state) for i in infos]
        )
