"""The tools over the Python SDK against a running server or gateway (``sie-server mcp --url``): its
retries, deadlines, msgpack wire and error classes, unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sie_sdk import EncodeResult, Item, Message, SIEAsyncClient
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

EXTRACTED = ("entities", "relations", "classifications", "objects", "data")


def vectors(result: EncodeResult) -> Vectors:
    sparse = None
    if "sparse" in result:
        indices: list[int] = np.asarray(result["sparse"]["indices"], dtype=np.int64).reshape(-1).tolist()
        sparse = SparseOut(indices=indices, values=floats(result["sparse"]["values"]))
    multivector = np.asarray(result["multivector"], np.float64).tolist() if "multivector" in result else None
    dense = floats(result["dense"]) if "dense" in result else None
    return Vectors(dense=dense, sparse=sparse, multivector=multivector)


class SDKBackend:
    def __init__(self, client: SIEAsyncClient):
        self.client = client

    async def encode(self, args: EncodeInput, headers: Mapping[str, str]) -> EncodeOutput:
        items: list[Item | str] = [{"id": str(i), "text": t} for i, t in enumerate(args.texts or [])]
        for i, image in enumerate(args.images or []):
            sent = {"data": image.data, "format": image.format} if image.format else image.data  # bytes: sniffed
            items.append({"id": str(i), "images": [sent]})
        results = await self.client.encode(
            args.model, items, output_types=list(args.output_types), is_query=args.is_query or None, dims=args.dims
        )
        model = results[0].get("model", args.model) if results else args.model
        return EncodeOutput(model=model, vectors=[vectors(r) for r in results])

    async def score(self, args: ScoreInput, headers: Mapping[str, str]) -> ScoreOutput:
        documents: list[Item | str] = [{"id": str(i), "text": t} for i, t in enumerate(args.documents)]
        answer = await self.client.score(args.model, {"id": "query", "text": args.query}, documents)
        results = [Ranked(index=int(s["item_id"]), score=s["score"], rank=s["rank"]) for s in answer["scores"]]
        return ScoreOutput(model=answer["model"], results=results)

    async def extract(self, args: ExtractInput, headers: Mapping[str, str]) -> ExtractOutput:
        item: Item = {"id": "0"}
        if args.text is not None:
            item["text"] = args.text
        if args.document is not None:
            item["document"] = {"data": args.document.data, "format": args.document.format or ""}
        if args.image is not None:
            item["images"] = [{"data": args.image.data, "format": args.image.format or "png"}]
        result = await self.client.extract(
            args.model, item, labels=args.labels, threshold=args.threshold, options=args.options
        )
        if "error" in result:
            raise ItemFailed(result["error"]["code"], result["error"]["message"])
        found: dict[str, Any] = {key: result.get(key, {} if key == "data" else []) for key in EXTRACTED}
        return ExtractOutput.model_validate({"model": result.get("model", args.model), **found})

    async def generate(self, args: GenerateInput, headers: Mapping[str, str]) -> GenerateOutput:
        messages: list[Message] | None = (
            [{"role": m.role, "content": m.content} for m in args.messages] if args.messages else None
        )
        answer = await self.client.generate(
            args.model,
            args.prompt,
            messages=messages,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            stop=args.stop,
            seed=args.seed,
            grammar=constraint.model_dump(exclude_none=True) if (constraint := args.constraint()) else None,
        )
        usage = UsageOut.model_validate(answer.get("usage", {}))
        model, text = answer.get("model", args.model), answer.get("text", "")
        return GenerateOutput(model=model, text=text, finish_reason=answer.get("finish_reason"), usage=usage)

    async def list_models(self, headers: Mapping[str, str]) -> ListModelsOutput:
        infos = await self.client.list_models()
        return ListModelsOutput(
            models=[
                ModelOut.model_validate(
                    {
                        "id": m["id"],
                        "tasks": m.get("tasks") or [],
                        "inputs": m.get("inputs") or [],
                        "dims": m.get("dims") if isinstance(m.get("dims"), dict) else {},
                        "state": str(m.get("state", "available")),
                    }
                )
                for m in infos
            ]
        )
