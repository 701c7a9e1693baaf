"""A local fake of the Hugging Face hub's file API on 127.0.0.1, serving one folder as one repo.

It answers what huggingface_hub asks for: ``GET /api/models/{repo}/revision/{rev}`` (the file
listing with sizes, blob ids and LFS sha256 when ``blobs`` is asked), ``GET /api/models/{repo}/tree/{rev}``
(the same as a recursive tree) and ``GET|HEAD
/{repo}/resolve/{rev}/{file}`` with Range, ETag, X-Repo-Commit, X-Linked-Size/X-Linked-Etag for LFS
files and Content-Length. ``cut_once`` names files whose first full transfer it breaks off half-way.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".gguf")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()  # git's object id


class FakeHub:
    def __init__(self, repo: str, folder: Path, commit: str, cut_once: tuple[str, ...] = ()):
        self.repo = repo
        self.commit = commit
        found = sorted(p for p in folder.rglob("*") if p.is_file())
        self.files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in found}
        self.to_cut = set(cut_once)
        self.ranges: list[tuple[str, str | None]] = []  # (file, Range header) of each file GET
        self.cut: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                hub.answer(self, body=True)

            def do_HEAD(self) -> None:
                hub.answer(self, body=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def is_lfs(self, name: str) -> bool:
        return name.endswith(LFS_SUFFIXES)

    def listing(self) -> dict[str, Any]:
        siblings = []
        for name, data in self.files.items():
            entry: dict[str, Any] = {"rfilename": name, "size": len(data), "blobId": git_blob_id(data)}
            if self.is_lfs(name):
                entry["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
            siblings.append(entry)
        return {"id": self.repo, "modelId": self.repo, "sha": self.commit, "private": False, "siblings": siblings}

    def tree(self) -> list[dict[str, Any]]:
        """The recursive file tree (``list_repo_tree``, which snapshot_download asks for at a commit)."""
        entries = []
        for name, data in self.files.items():
            entry: dict[str, Any] = {"type": "file", "path": name, "size": len(data), "oid": git_blob_id(data)}
            if self.is_lfs(name):
                entry["lfs"] = {"size": len(data), "oid": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
            entries.append(entry)
        return entries

    def answer(self, req: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlsplit(req.path).path)
        json_type = {"Content-Type": "application/json"}
        if path.startswith(f"/api/models/{self.repo}/revision/") or path == f"/api/models/{self.repo}":
            return self._send(req, 200, json.dumps(self.listing()).encode(), json_type, body)
        if path.startswith(f"/api/models/{self.repo}/tree/"):
            return self._send(req, 200, json.dumps(self.tree()).encode(), json_type, body)
        prefix = f"/{self.repo}/resolve/"
        if not path.startswith(prefix):
            return self._send(req, 404, b'{"error":"Repository not found"}', {"X-Error-Code": "RepoNotFound"}, body)
        _revision, _, name = path[len(prefix) :].partition("/")
        if name not in self.files:
            return self._send(req, 404, b'{"error":"Entry not found"}', {"X-Error-Code": "EntryNotFound"}, body)
        data = self.files[name]
        headers = {"X-Repo-Commit": self.commit, "Accept-Ranges": "bytes", "ETag": f'"{git_blob_id(data)}"'}
        if self.is_lfs(name):
            sha = hashlib.sha256(data).hexdigest()
            headers.update({"X-Linked-Size": str(len(data)), "X-Linked-Etag": f'"{sha}"', "ETag": f'"{sha}"'})
        if not body:
            return self._send(req, 200, data, headers, body=False)
        wanted = req.headers.get("Range")
        self.ranges.append((name, wanted))
        start = int(wanted.removeprefix("bytes=").split("-")[0]) if wanted else 0
        status = 206 if wanted else 200
        if wanted:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        part = data[start:]
        if name in self.to_cut and not wanted:  # the first full transfer: half the bytes, then a dead connection
            self.to_cut.discard(name)
            self.cut.append(name)
            req.send_response(status)
            for key, value in {**headers, "Content-Length": str(len(part))}.items():
                req.send_header(key, value)
            req.end_headers()
            req.wfile.write(part[: len(part) // 2])
            req.wfile.flush()
            req.close_connection = True
            return None
        return self._send(req, status, part, headers, body)

    def _send(self, req: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str], body: bool) -> None:
        req.send_response(status)
        for key, value in {**headers, "Content-Length": str(len(data))}.items():
            req.send_header(key, value)
        req.end_headers()
        if body:
            req.wfile.write(data)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
