"""``sie-server serve``, ``gateway``, ``models list|pull``, ``bench``, ``top`` and ``mcp``.

The flags are built from the settings models (``settings.Settings``,
``cluster/gateway_settings.GatewaySettings``): each field is a flag that also reads its
``SIE_*`` variable, and its default is written only on the model.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from sie_server.catalog.schema import ModelConfig
from sie_server.cli_flags import add_flags, read_settings
from sie_server.cluster.gateway_settings import GatewaySettings
from sie_server.contract.model_filter import OUTPUTS, TASKS, ModelFilter
from sie_server.settings import CatalogSettings, CommonSettings, Settings


def _observe(settings: CommonSettings, service: str) -> None:
    """Log lines (text or JSON, with request ids) and, when OTEL_EXPORTER_OTLP_ENDPOINT is set, traces."""
    from sie_server.observability import tracing
    from sie_server.observability.logging import setup_logging

    setup_logging(settings.log_format, settings.verbose)
    tracing.setup(service)


class _Parser(argparse.ArgumentParser):
    """Refusals are one line (and exit status 2), not the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="sie-server", description="SIE inference server")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    serve = sub.add_parser("serve", help="run the HTTP server")
    add_flags(serve, Settings, environ=environ)
    gateway = sub.add_parser("gateway", help="run the cluster gateway in front of NATS JetStream")
    add_flags(gateway, GatewaySettings, environ=environ)
    models = sub.add_parser("models", help="inspect the catalog")
    models_sub = models.add_subparsers(dest="models_command", required=True, parser_class=_Parser)
    listing = models_sub.add_parser("list", help="print the catalog with each model's weights source")
    add_flags(listing, CatalogSettings, environ=environ)
    listing.add_argument(
        "--url",
        default=(environ if environ is not None else os.environ).get("SIE_URL"),
        help="a running server: show each model's state and the precision it runs in, and why [env SIE_URL]",
    )
    listing.add_argument("--family", action="store_true", help="group by adapter family, with tasks and dims")
    listing.add_argument("--task", choices=TASKS, help="only models that do this task")
    listing.add_argument("--output", choices=OUTPUTS, help="only models that give this encode output type")
    pull = models_sub.add_parser("pull", help="download a model's pinned weights into the Hugging Face cache")
    add_flags(pull, CatalogSettings, environ=environ)
    pull.add_argument("id", help="the model's id in the catalog")
    pull.add_argument("--revision", help="a commit (or branch) to pull instead of the config's pinned revision")
    url = (environ if environ is not None else os.environ).get("SIE_URL") or "http://127.0.0.1:8080"
    bench = sub.add_parser("bench", help="send a seeded corpus to a running server: throughput, latency, padding")
    bench.add_argument("model", help="a model the server serves")
    bench.add_argument("--url", default=url, help="the server [env SIE_URL; default %(default)s]")
    bench.add_argument("--texts", type=int, default=200, help="texts to send, one per request (%(default)s)")
    bench.add_argument("--concurrency", type=int, default=8, help="requests in flight (%(default)s)")
    bench.add_argument("--seed", type=int, default=0, help="the corpus's seed (%(default)s)")
    top = sub.add_parser("top", help="a live view of a running server's models, queues and memory")
    top.add_argument("--url", default=url, help="the server or gateway [env SIE_URL; default %(default)s]")
    top.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (%(default)s)")
    top.add_argument("--once", action="store_true", help="print one frame and exit (for scripts)")
    mcp = sub.add_parser("mcp", help="the MCP tools on stdio, calling a running server (sie_server/mcp)")
    mcp.add_argument("--url", default=url, help="the server or gateway [env SIE_URL; default %(default)s]")
    mcp.add_argument(
        "--api-key",
        default=(environ if environ is not None else os.environ).get("SIE_API_KEY"),
        help="sent as Authorization: Bearer <key> to a server that requires keys [env SIE_API_KEY]",
    )
    return parser


def serve(settings: Settings) -> int:
    _observe(settings, "sie-server")
    # ONNX Runtime (>= 1.29, rapidocr's and faster-whisper's runtime) sends 1DS telemetry from native code, to
    # mobile.events.data.microsoft.com, unless this is set before it starts: off unless the user asks otherwise
    # (tests/server/test_offline_guard.py saw its DNS lookups before this)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    if settings.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["ORT_DISABLE_TELEMETRY"] = "1"  # offline means offline, whatever the environment says
    from sie_server.memory.heap import bound_arena_tops, bound_shape_caches

    bound_shape_caches()  # before any batch runs: oneDNN's per-shape caches would grow with every batch shape
    bound_arena_tops()  # before torch and the server start their threads, so they share the capped arenas
    import torch

    from sie_server.serving import run

    torch.set_num_threads(settings.threads)
    run(settings)
    return 0


def gateway_settings(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> GatewaySettings:
    """The gateway's settings with its catalog loaded and checked as the server checks its own."""
    from sie_server.catalog.loader import load_served

    settings = read_settings(GatewaySettings, args, environ=environ)
    return settings.model_copy(update={"loaded_catalog": load_served(settings.models_dir, settings.models)})


def run_gateway(settings: GatewaySettings) -> int:
    from sie_server import serving

    _observe(settings, "sie-gateway")
    serving.run_gateway(settings)
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


def _dims(dims: dict[str, int]) -> str:
    return ", ".join(f"{kind} {dim}" for kind, dim in dims.items()) or "-"


def print_families(configs: list[ModelConfig]) -> None:
    """The models under their adapter family, each with its tasks and its outputs' dims."""
    width = max((len(c.id) for c in configs), default=0)
    for family in sorted({c.adapter for c in configs}):
        print(family)
        for config in sorted((c for c in configs if c.adapter == family), key=lambda c: c.id):
            encode = config.tasks.encode
            tasks = ",".join(config.tasks.names())
            print(f"  {config.id.ljust(width)}  {tasks.ljust(20)}  {_dims(encode.dims() if encode else {})}".rstrip())


def list_models(args: argparse.Namespace) -> int:
    from sie_server.catalog.info import catalog_info
    from sie_server.catalog.loader import Catalog

    chosen = read_settings(CatalogSettings, args)
    catalog = Catalog(chosen.models_dir, set(chosen.models) if chosen.models else None)
    wanted = ModelFilter(args.task, args.output)
    configs = [c for c in catalog.list() if wanted.matches(catalog_info(c))]
    if args.family:
        print_families(configs)
    else:
        print_table(configs, args.url)
    for message in catalog.errors.values():
        print(f"error: {message}", file=sys.stderr)
    return 1 if catalog.errors else 0


def pull_model(args: argparse.Namespace) -> int:
    from sie_server.catalog.loader import Catalog
    from sie_server.tools.pull import run

    chosen = read_settings(CatalogSettings, args)
    catalog = Catalog(chosen.models_dir, set(chosen.models) if chosen.models else None)
    config = catalog.get(args.id)
    if config is None:
        raise ValueError(f"model {args.id} is not in the catalog ({chosen.models_dir})")
    return run(config, args.revision)


def print_table(configs: list[ModelConfig], url: str | None) -> None:
    """One row per model: its weights source and precision (with ``url``: its state on that server)."""
    from sie_server.adapters.runtime.weights import describe
    from sie_server.cpu_features import detect
    from sie_server.tools.pull import cached_size

    served = _served(url) if url else None
    live = {m["id"]: m for m in served["models"]} if served else {}
    rows = [["ID", "ADAPTER", "TASKS", "SOURCE", "OFFLINE", "CACHED", *(["STATE"] if served else []), "PRECISION"]]
    reasons = []
    for config in sorted(configs, key=lambda c: c.id):
        source, offline = describe(config)
        row = [config.id, config.adapter, ",".join(config.tasks.names()), source, "yes" if offline else "no"]
        row.append(cached_size(config))
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
    where = f"the server at {url}" if served and served.get("cpu") else "this machine"
    print(
        f"\ncpu ({where}): {cpu['model'] or 'unknown'}; flags: {', '.join(cpu['features']) or 'none relevant'}; "
        f"precisions: {', '.join(cpu['precisions'])}"
    )
    for line in reasons:
        print(f"  {line}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return serve(read_settings(Settings, args))
        if args.command == "gateway":
            return run_gateway(gateway_settings(args))
        if args.command == "bench":
            from sie_server.tools import bench

            return bench.run(args.url, args.model, args.texts, args.concurrency, args.seed)
        if args.command == "top":
            from sie_server.tools import top

            return top.run(args.url, args.interval, once=args.once)
        if args.command == "mcp":
            from sie_server.mcp import stdio

            return stdio.run(args.url, args.api_key or None)
        if args.models_command == "pull":
            return pull_model(args)
        return list_models(args)
    except ValueError as exc:  # bad settings or a broken catalog: say what, not a traceback
        print(f"sie-server: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
