"""Downloading a model's pinned revision into the Hugging Face cache, resumable across runs.

The file listing comes from the hub's model API (``HfApi.model_info(files_metadata=True)``: each
file's size, git blob id and, for LFS files, sha256). Each file streams into
``blobs/<etag>.sie-partial`` in the cache; a later run continues it with an HTTP Range request
instead of starting over (huggingface_hub's own downloader deletes a partial file when its process
fails). A complete file is checked (size; sha256 for LFS files, the git blob id for the others),
moved to ``blobs/<etag>`` and linked from ``snapshots/<commit>/<name>``: the layout
``hf_hub_download`` writes, so the server finds it with the network off.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import httpx

CHUNK = 1 << 20


class PullError(Exception):
    """A pull that cannot go on: one line for the person running it."""


@dataclass(frozen=True)
class RemoteFile:
    name: str
    size: int
    etag: str  # the blob's name in the cache: sha256 for LFS files, the git blob id otherwise
    sha256: str | None  # LFS files only


@dataclass(frozen=True)
class Plan:
    repo: str
    revision: str
    commit: str
    files: list[RemoteFile]

    @property
    def total(self) -> int:
        return sum(f.size for f in self.files)


# (file, bytes now on disk for it) after each chunk; the total is the caller's sum
Progress = Callable[[RemoteFile, int], None]


def plan(repo: str, revision: str, patterns: list[str]) -> Plan:
    """The files of ``repo@revision`` matching ``patterns``, from the hub's file listing."""
    from huggingface_hub import HfApi

    try:
        info = HfApi().model_info(repo, revision=revision, files_metadata=True)
    except Exception as exc:  # the hub client raises many kinds (connection, HTTP, offline mode)
        raise PullError(f"cannot list {repo}@{revision} on {hub_endpoint()}: {_one_line(exc)}") from None
    files = []
    wanted = [s for s in info.siblings or [] if any(fnmatch(s.rfilename, p) for p in patterns)]
    for sibling in wanted:
        lfs = sibling.lfs
        etag = lfs.sha256 if lfs else sibling.blob_id
        size = lfs.size if lfs else sibling.size
        if etag is None or size is None:
            raise PullError(f"{repo}@{revision}: the hub did not give the size and id of {sibling.rfilename}")
        files.append(RemoteFile(sibling.rfilename, int(size), etag, lfs.sha256 if lfs else None))
    if not files:
        raise PullError(f"{repo}@{revision} has no files matching {', '.join(patterns)}")
    return Plan(repo, revision, info.sha or revision, files)


def hub_endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def repo_cache(repo: str) -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE) / ("models--" + repo.replace("/", "--"))


def snapshot_dir(chosen: Plan) -> Path:
    return repo_cache(chosen.repo) / "snapshots" / chosen.commit


def on_disk(chosen: Plan, file: RemoteFile) -> int:
    """Bytes of ``file`` already here: its size when complete, a partial file's length, or 0."""
    blobs = repo_cache(chosen.repo) / "blobs"
    if (blobs / file.etag).is_file():
        return file.size
    partial = blobs / f"{file.etag}.sie-partial"
    return partial.stat().st_size if partial.is_file() else 0


def download(chosen: Plan, file: RemoteFile, progress: Progress, client: httpx.Client) -> Path:
    """``file`` in the cache, checked and linked into the snapshot; continues a partial file."""
    blobs = repo_cache(chosen.repo) / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    blob = blobs / file.etag
    if not blob.is_file():
        partial = blobs / f"{file.etag}.sie-partial"
        _fetch(chosen, file, partial, progress, client)
        _verify(file, partial)
        partial.replace(blob)
    progress(file, file.size)
    link = snapshot_dir(chosen) / file.name
    _link(blob, link)
    if chosen.revision != chosen.commit:  # a branch or tag: the cache maps it to the commit
        ref = repo_cache(chosen.repo) / "refs" / chosen.revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(chosen.commit)
    return link


def _fetch(chosen: Plan, file: RemoteFile, partial: Path, progress: Progress, client: httpx.Client) -> None:
    from huggingface_hub import get_token, hf_hub_url

    url = hf_hub_url(chosen.repo, file.name, revision=chosen.commit)
    have = partial.stat().st_size if partial.is_file() else 0
    if have > file.size:  # not this file's bytes: start over
        partial.unlink()
        have = 0
    if have == file.size:
        return
    token = get_token()
    headers = {"Accept-Encoding": "identity", **({"Authorization": f"Bearer {token}"} if token else {})}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        with client.stream("GET", url, headers=headers, follow_redirects=True) as answer:
            if answer.status_code not in (200, 206):
                raise PullError(f"{file.name}: the hub answered HTTP {answer.status_code} for {url}")
            mode = "ab" if answer.status_code == 206 else "wb"  # 200: the server ignored the Range
            have = have if mode == "ab" else 0
            with partial.open(mode) as out:
                for chunk in answer.iter_bytes(CHUNK):
                    out.write(chunk)
                    have += len(chunk)
                    progress(file, have)
    except httpx.HTTPError as exc:
        kept = partial.stat().st_size if partial.is_file() else 0
        raise PullError(
            f"{file.name}: transfer from {hub_endpoint()} broke off at {kept} of {file.size} bytes "
            f"({_one_line(exc)}); run the same command again to continue"
        ) from None


def _verify(file: RemoteFile, partial: Path) -> None:
    size = partial.stat().st_size
    if size != file.size:
        raise PullError(f"{file.name}: got {size} bytes, the hub lists {file.size}; run again to continue")
    # a file kept in git itself is named by its git blob id: sha1 over a header and the bytes
    digest = hashlib.sha256() if file.sha256 is not None else hashlib.sha1(f"blob {file.size}\0".encode())
    with partial.open("rb") as data:
        for chunk in iter(lambda: data.read(CHUNK), b""):
            digest.update(chunk)
    if digest.hexdigest() != file.etag:
        partial.unlink()
        kind = "sha256" if file.sha256 is not None else "git blob id"
        raise PullError(f"{file.name}: {kind} {digest.hexdigest()} is not the hub's {file.etag}; deleted, run again")


def _link(blob: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    try:
        link.symlink_to(os.path.relpath(blob, link.parent))
    except OSError:  # a file system without symlinks: a copy, as huggingface_hub does
        import shutil

        shutil.copyfile(blob, link)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"
