"""``sie-server models pull ID [--revision REV]``: a catalog model's pinned weights into the HF cache.

Progress bars per file and in total (rich), a check of every file, then the proof that counts:
the model's weights resolve with the network off, as the server will resolve them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import httpx

from sie_server.catalog.schema import ModelConfig
from sie_server.tools.hub_pull import Plan, PullError, RemoteFile, download, on_disk, plan, repo_cache, snapshot_dir


@dataclass(frozen=True)
class Target:
    """What to pull for a model: a repo at a revision, and which of its files."""

    repo: str
    revision: str
    patterns: list[str]
    gguf: bool


def target(config: ModelConfig, revision: str | None) -> Target:
    """The GGUF file alone for a profile that runs on llama.cpp (or a GGUF-only source); else the weights."""
    from sie_server.adapters.runtime.backends import effective_backend
    from sie_server.adapters.runtime.weights import hub_patterns

    src = config.source
    profile = config.profiles.get("cpu")
    wants_gguf = bool(src.gguf_hf and src.gguf_file) and (
        not src.hf or (profile is not None and effective_backend(config, profile) == "llamacpp")
    )
    if wants_gguf and src.gguf_hf and src.gguf_file and src.gguf_revision:
        return Target(src.gguf_hf, revision or src.gguf_revision, [src.gguf_file], gguf=True)
    if src.hf and src.revision:
        return Target(src.hf, revision or src.revision, hub_patterns(config), gguf=False)
    where = f"the folder {src.path}" if src.path else f"the package {src.package}"
    raise PullError(f"model {config.id} has no hub source to pull: its weights come from {where}")


def pinned(config: ModelConfig, chosen: Target, commit: str) -> ModelConfig:
    """``config`` pointing at the pulled commit (what ``--revision`` asked for)."""
    key = "gguf_revision" if chosen.gguf else "revision"
    return config.model_copy(update={"source": config.source.model_copy(update={key: commit})})


def works_offline(config: ModelConfig, chosen: Target) -> str:
    """Where the weights resolve from with the network off, or a PullError saying why not."""
    from sie_server.adapters.runtime.locations import gguf_offline
    from sie_server.adapters.runtime.weights import locate_offline

    found = gguf_offline(config) if chosen.gguf else locate_offline(config)
    if found is None:
        raise PullError(f"model {config.id}: the files are in the cache, but the weights do not resolve offline")
    return f"{found.source} {found.path}"


def pull(config: ModelConfig, revision: str | None) -> int:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    chosen = target(config, revision)
    listing = plan(chosen.repo, chosen.revision, chosen.patterns)
    print(f"{config.id}: {chosen.repo}@{listing.commit}, {len(listing.files)} files, {_size(listing.total)}")
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    files = listing.files
    with Progress(*columns, transient=False) as bars, httpx.Client(timeout=httpx.Timeout(30.0)) as client:
        total = bars.add_task("total", total=listing.total, completed=_done(listing))
        tasks = {f.name: bars.add_task(f"  {f.name}", total=f.size, completed=on_disk(listing, f)) for f in files}

        def moved(file: RemoteFile, now: int) -> None:
            bars.update(tasks[file.name], completed=now)
            bars.update(total, completed=sum(bars.tasks[t].completed for t in tasks.values()))

        for file in listing.files:
            download(listing, file, moved, client)
    print(f"verified {len(listing.files)} files (sizes; sha256 of LFS files, git ids of the others)")
    print(f"in {snapshot_dir(listing)}")
    print(f"works offline: {works_offline(pinned(config, chosen, listing.commit), chosen)}")
    return 0


def _done(listing: Plan) -> int:
    return sum(on_disk(listing, f) for f in listing.files)


def cached_size(config: ModelConfig) -> str:
    """The model's repo size in the HF cache ('-' when not there), for ``models list``."""
    repos = [r for r in (config.source.hf, config.source.gguf_hf) if r]
    total = 0
    for repo in repos:
        blobs = repo_cache(repo) / "blobs"
        if blobs.is_dir():
            total += sum(f.stat().st_size for f in blobs.iterdir() if f.is_file() and "." not in f.name)
    return _size(total) if total else "-"


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def run(config: ModelConfig, revision: str | None) -> int:
    """The command: 0 when pulled and resolvable offline; one line on stderr and 1 otherwise."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0"):
        print("sie-server: models pull needs the network, but HF_HUB_OFFLINE is set", file=sys.stderr)
        return 1
    try:
        return pull(config, revision)
    except PullError as exc:
        print(f"sie-server: models pull {config.id}: {exc}", file=sys.stderr)
        return 1
