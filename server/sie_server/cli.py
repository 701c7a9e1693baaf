"""``sie-server serve`` and ``sie-server models list``. Every flag also reads an ``SIE_*`` variable."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from sie_server.settings import REPO_CATALOG, Settings, default_threads


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"SIE_{name}", default)


def _env_flag(name: str) -> bool:
    return (_env(name, "") or "").strip().lower() in ("1", "true", "yes", "on")


def _float(value: str | None) -> float | None:
    return float(value) if value else None


def _ids(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


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
    serve.add_argument("-v", "--verbose", action="store_true", default=_env_flag("VERBOSE"), help="debug logs")

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
    from sie_server.cluster.gateway_routes import create_gateway_app

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


def list_models(args: argparse.Namespace) -> int:
    from sie_server.adapters.weights import describe
    from sie_server.catalog.loader import Catalog

    catalog = Catalog(args.models_dir, set(_ids(args.models)) or None)
    rows = [("ID", "ADAPTER", "TASKS", "SOURCE", "OFFLINE")]
    for config in sorted(catalog.list(), key=lambda c: c.id):
        source, offline = describe(config)
        rows.append((config.id, config.adapter, ",".join(config.tasks.names()), source, "yes" if offline else "no"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
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
