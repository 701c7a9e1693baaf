"""``sie-server serve`` and ``sie-server models list``. Every flag also reads an ``SIE_*`` variable."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast, get_args

from sie_server.catalog.schema import CpuPrecision
from sie_server.settings import REPO_CATALOG, Settings, default_threads


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"SIE_{name}", default)


def _env_flag(name: str) -> bool:
    return (_env(name, "") or "").strip().lower() in ("1", "true", "yes", "on")


def _float(value: str | None) -> float | None:
    return float(value) if value else None


def _ids(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _precisions(value: str | None) -> list[CpuPrecision] | None:
    names = _ids(value)
    known = get_args(CpuPrecision)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"--cpu-precision: unknown {', '.join(unknown)}; use a list of {', '.join(known)}")
    return [cast(CpuPrecision, n) for n in names] or None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sie-server", description="SIE inference server")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP server")
    serve.add_argument("--host", default=_env("HOST", "127.0.0.1"), help="bind address [SIE_HOST]")
    serve.add_argument("--port", type=int, default=int(_env("PORT", "8080") or 8080), help="[SIE_PORT]")
    _add_catalog_args(serve)
    serve.add_argument("--preload", default=_env("PRELOAD", ""), help="comma-separated ids to load before ready")
    serve.add_argument("--device", default=_env("DEVICE", "auto"), help="auto | cpu | cuda [SIE_DEVICE]")
    serve.add_argument(
        "--offline",
        action="store_true",
        default=_env_flag("OFFLINE") or os.environ.get("HF_HUB_OFFLINE", "") == "1",
        help="never touch the Hugging Face hub [SIE_OFFLINE, HF_HUB_OFFLINE=1]",
    )
    serve.add_argument(
        "--threads",
        type=int,
        default=int(_env("THREADS", str(default_threads())) or 1),
        help="torch threads (default: all cores) [SIE_THREADS]",
    )
    serve.add_argument(
        "--cpu-precision",
        default=_env("CPU_PRECISION", ""),
        help="comma-separated precisions every cpu model may try, in order (int8, bf16, fp32), instead of its "
        "profile's cpu_precision; each must pass the quality gate, fp32 is the last resort [SIE_CPU_PRECISION]",
    )
    serve.add_argument("--load-timeout-s", type=float, default=float(_env("LOAD_TIMEOUT_S", "300") or 300))
    serve.add_argument("--max-queued-items", type=int, default=int(_env("MAX_QUEUED_ITEMS", "65536") or 0))
    _add_limit_args(serve)
    serve.add_argument(
        "--memory-budget",
        default=_env("MEMORY_BUDGET"),
        help="bytes for models (6GiB, 512MB) or a fraction of device memory / available RAM; default 0.8",
    )
    serve.add_argument("--pin", default=_env("PIN", ""), help="comma-separated ids loaded at start; never evicted")
    serve.add_argument(
        "--idle-evict-s",
        type=float,
        default=_float(_env("IDLE_EVICT_S")),
        help="unload models idle this long",
    )
    serve.add_argument(
        "--batch-share",
        type=float,
        default=float(_env("BATCH_SHARE", "0.1") or 0.1),
        help="minimum share of batches that batch-priority work gets while interactive work waits",
    )
    serve.add_argument("--queue", default=_env("QUEUE"), help="nats:// URL: also pull work from JetStream [SIE_QUEUE]")
    serve.add_argument("--pool", default=_env("POOL", "default"), help="the worker pool to pull for [SIE_POOL]")
    serve.add_argument("--ack-wait-s", type=float, default=float(_env("ACK_WAIT_S", "30") or 30))
    serve.add_argument("--max-deliver", type=int, default=int(_env("MAX_DELIVER", "5") or 5))
    serve.add_argument(
        "--single-lane",
        action="store_true",
        default=_env_flag("SINGLE_LANE"),
        help="one execution lane: interactive batches wait for a running batch-class batch to finish",
    )
    serve.add_argument(
        "--batch-max-tokens",
        type=int,
        default=int(_env("BATCH_MAX_TOKENS", "2048") or 0) or None,
        help="token cap of a batch-priority batch (interactive work waits at most one such batch)",
    )
    serve.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=_env_flag("VERBOSE"),
        help="debug logs and an access-log line per request",
    )

    gateway = sub.add_parser("gateway", help="run the cluster gateway in front of NATS JetStream")
    gateway.add_argument("--nats", default=_env("NATS", "nats://127.0.0.1:4222"), help="NATS URL [SIE_NATS]")
    gateway.add_argument("--host", default=_env("HOST", "127.0.0.1"))
    gateway.add_argument("--port", type=int, default=int(_env("PORT", "8080") or 8080))
    _add_catalog_args(gateway)
    gateway.add_argument("--route", action="append", default=[], help="PATTERN=POOL: models matching go to POOL")
    gateway.add_argument("--default-pool", default=_env("DEFAULT_POOL", "default"))
    gateway.add_argument(
        "--hold-s",
        type=float,
        default=float(_env("HOLD_S", "30") or 30),
        help="how long a request waits for a worker when none is up",
    )
    gateway.add_argument("--timeout-s", type=float, default=float(_env("GATEWAY_TIMEOUT_S", "600") or 600))
    gateway.add_argument("--split-items", type=int, default=int(_env("SPLIT_ITEMS", "32") or 32))
    gateway.add_argument("--ack-wait-s", type=float, default=float(_env("ACK_WAIT_S", "30") or 30))
    _add_limit_args(gateway)
    gateway.add_argument("-v", "--verbose", action="store_true", default=_env_flag("VERBOSE"))

    models = sub.add_parser("models", help="inspect the catalog")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    listing = models_sub.add_parser("list", help="print the catalog with each model's weights source")
    _add_catalog_args(listing)
    listing.add_argument(
        "--url",
        default=_env("URL"),
        help="a running server: show each model's state and the precision it runs in, and why [SIE_URL]",
    )
    return parser


def _add_limit_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-items-per-request", type=int, default=int(_env("MAX_ITEMS", "8192") or 0))
    parser.add_argument("--max-text-bytes", type=int, default=int(_env("MAX_TEXT_BYTES", str(256 * 1024)) or 0))
    parser.add_argument("--max-body-bytes", type=int, default=int(_env("MAX_BODY_BYTES", str(64 * 2**20)) or 0))


def _add_catalog_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--models-dir",
        type=Path,
        default=Path(_env("MODELS_DIR", str(REPO_CATALOG)) or REPO_CATALOG),
        help="catalog folder of model YAML files [SIE_MODELS_DIR]",
    )
    parser.add_argument("-m", "--models", default=_env("MODELS", ""), help="comma-separated ids to serve [SIE_MODELS]")


def serve(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    settings = Settings(
        host=args.host,
        port=args.port,
        models_dir=args.models_dir,
        models=_ids(args.models) or None,
        preload=_ids(args.preload),
        device=args.device,
        offline=args.offline,
        threads=args.threads,
        verbose=args.verbose,
        load_timeout_s=args.load_timeout_s,
        max_queued_items=args.max_queued_items,
        max_items_per_request=args.max_items_per_request,
        max_text_bytes=args.max_text_bytes,
        max_body_bytes=args.max_body_bytes,
        memory_budget=args.memory_budget,
        pin=_ids(args.pin),
        cpu_precision=_precisions(args.cpu_precision),
        idle_evict_s=args.idle_evict_s,
        batch_share=args.batch_share,
        batch_max_tokens=args.batch_max_tokens,
        single_lane=args.single_lane,
        queue=args.queue,
        pool=args.pool,
        ack_wait_s=args.ack_wait_s,
        max_deliver=args.max_deliver,
    )
    import torch

    from sie_server.serving import run

    torch.set_num_threads(settings.threads)
    run(settings)
    return 0


def run_gateway(args: argparse.Namespace) -> int:
    import uvicorn

    from sie_server.catalog.loader import Catalog
    from sie_server.cluster.gateway import GatewaySettings
    from sie_server.cluster.gateway_app import create_gateway_app

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    routes = []
    for rule in args.route:
        pattern, _, pool = rule.partition("=")
        if not pattern or not pool:
            raise ValueError(f"--route {rule!r}: use PATTERN=POOL, e.g. 'Qwen/*=gpu'")
        routes.append((pattern, pool))
    tokens = tuple(t.strip() for t in os.environ.get("SIE_AUTH_TOKENS", "").split(",") if t.strip())
    settings = GatewaySettings(
        nats_url=args.nats,
        catalog=Catalog(args.models_dir, set(_ids(args.models)) or None),
        routes=routes,
        default_pool=args.default_pool,
        hold_s=args.hold_s,
        timeout_s=args.timeout_s,
        split_items=args.split_items,
        ack_wait_s=args.ack_wait_s,
        auth_tokens=tokens,
        max_items_per_request=args.max_items_per_request,
        max_text_bytes=args.max_text_bytes,
        max_body_bytes=args.max_body_bytes,
    )
    uvicorn.run(create_gateway_app(settings), host=args.host, port=args.port, log_level="info")
    return 0


def _served(url: str) -> dict[str, Any]:
    """A running server's ``GET /v1/models`` answer."""
    import httpx

    try:
        answer = httpx.get(f"{url.rstrip('/')}/v1/models", timeout=10.0)
        answer.raise_for_status()
    except httpx.HTTPError as exc:
        raise ValueError(f"--url {url}: {exc}") from None
    body: dict[str, Any] = answer.json()
    return body


def list_models(args: argparse.Namespace) -> int:
    from sie_server.adapters.weights import describe
    from sie_server.catalog.loader import Catalog
    from sie_server.cpu_features import detect

    catalog = Catalog(args.models_dir, set(_ids(args.models)) or None)
    served = _served(args.url) if args.url else None
    live = {m["id"]: m for m in served["models"]} if served else {}
    rows = [["ID", "ADAPTER", "TASKS", "SOURCE", "OFFLINE", *(["STATE"] if served else []), "PRECISION"]]
    reasons = []
    for config in sorted(catalog.list(), key=lambda c: c.id):
        source, offline = describe(config)
        row = [config.id, config.adapter, ",".join(config.tasks.names()), source, "yes" if offline else "no"]
        allowed = ">".join(config.profiles["cpu"].cpu_precision)
        if served:
            info = live.get(config.id, {})
            precision = info.get("precision") or {}
            row.append(str(info.get("state", "not served")))
            allowed = str(precision.get("running") or f"allows {allowed}")
            if precision.get("reason"):
                reasons.append(f"{config.id}: {precision['reason']}")
        rows.append([*row, allowed])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    cpu = served.get("cpu") if served else None
    cpu = cpu or detect().as_dict()
    where = f"the server at {args.url}" if served and served.get("cpu") else "this machine"
    print(
        f"\ncpu ({where}): {cpu['model'] or 'unknown'}; flags: {', '.join(cpu['features']) or 'none relevant'}; "
        f"precisions: {', '.join(cpu['precisions'])}"
    )
    for line in reasons:
        print(f"  {line}")
    for message in catalog.errors.values():
        print(f"error: {message}", file=sys.stderr)
    return 1 if catalog.errors else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return serve(args)
        if args.command == "gateway":
            return run_gateway(args)
        return list_models(args)
    except ValueError as exc:  # bad settings or a broken catalog: say what, not a traceback
        print(f"sie-server: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
