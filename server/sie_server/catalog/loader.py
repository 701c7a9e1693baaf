"""Loading the catalog folder, and picking up files added or changed while the server runs."""

from __future__ import annotations

import difflib
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from sie_server.catalog.schema import ModelConfig

log = logging.getLogger(__name__)


class CatalogError(ValueError):
    """A config file that cannot be served: bad YAML, a schema violation or a duplicate id."""


@dataclass(frozen=True)
class Entry:
    config: ModelConfig
    path: Path
    mtime_ns: int


def parse_config_file(path: Path) -> ModelConfig:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:  # removed or rewritten while being read, or not text
        raise CatalogError(f"{path}: cannot be read: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping at the top level")
    try:
        return ModelConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise CatalogError(f"{path}: {problems}") from exc


def _listing(folder: Path) -> dict[Path, int]:
    """The folder's YAML files and their modification times (a file removed while listing is left out)."""
    listing: dict[Path, int] = {}
    for path in sorted(folder.glob("*.y*ml")):
        try:
            listing[path] = path.stat().st_mtime_ns
        except FileNotFoundError:
            continue
    return listing


def canonical_id(model_id: str) -> str:
    """``org__name`` is accepted as ``org/name`` (for clients that cannot put a slash in a path)."""
    if "/" not in model_id and "__" in model_id:
        return model_id.replace("__", "/", 1)
    return model_id


class Catalog:
    """The configs in one folder, optionally restricted to a set of ids.

    ``get`` and ``list`` re-read the folder when its files changed (at most once per
    ``rescan_interval_s``), so dropping a YAML file into the folder serves a new model
    without a restart. A file that was valid and is now broken keeps its last good config
    serving (``error_for`` says why it is stale); a deleted file stops new requests for its
    model (work already queued holds its config and finishes).
    """

    def __init__(self, folder: Path, served: set[str] | None = None, rescan_interval_s: float = 1.0):
        self.folder = folder
        self.served = {canonical_id(m) for m in served} if served else None
        self.rescan_interval_s = rescan_interval_s
        self.errors: dict[Path, str] = {}
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self._last_scan = 0.0
        self._listing: dict[Path, int] = {}
        if not folder.is_dir():
            raise CatalogError(f"models folder {folder} does not exist")
        self.rescan(force=True)

    def rescan(self, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_scan < self.rescan_interval_s:
                return
            self._last_scan = now
            listing = _listing(self.folder)
            if listing == self._listing:
                return
            self._listing = listing
            entries: dict[str, Entry] = {}
            errors: dict[Path, str] = {}
            previous = {e.path: e for e in self._entries.values()}
            for path, mtime in listing.items():
                old = previous.get(path)
                try:
                    config = old.config if old and old.mtime_ns == mtime else parse_config_file(path)
                except CatalogError as exc:
                    if old is None:
                        errors[path] = str(exc)
                        continue
                    errors[path] = f"{exc} (the last good config of {old.config.id} serves until the file is fixed)"
                    config, mtime = old.config, old.mtime_ns
                if self.served is not None and config.id not in self.served:
                    continue
                if config.id in entries:
                    errors[path] = f"{path}: id {config.id} is already defined in {entries[config.id].path}"
                    continue
                entries[config.id] = Entry(config, path, mtime)
            for path, message in errors.items():
                if self.errors.get(path) != message:
                    log.error("catalog: %s", message)
            self._entries = entries
            self.errors = errors

    def get(self, model_id: str) -> ModelConfig | None:
        self.rescan()  # rate-limited: a deleted or changed file is seen within rescan_interval_s
        entry = self._entries.get(canonical_id(model_id))
        return entry.config if entry else None

    def error_for(self, model_id: str) -> str | None:
        """Why the model's config file is not what serves (broken since its config was read), or None."""
        entry = self._entries.get(canonical_id(model_id))
        return self.errors.get(entry.path) if entry else None

    def entry(self, model_id: str) -> Entry | None:
        return self._entries.get(canonical_id(model_id))

    def list(self) -> list[ModelConfig]:
        self.rescan()
        return [e.config for e in self._entries.values()]

    def suggest(self, model_id: str) -> str | None:
        """The nearest served id, compared whole and then by name without the org."""
        ids = list(self._entries)
        key = canonical_id(model_id).lower()
        by_full = {i.lower(): i for i in ids}
        match = difflib.get_close_matches(key, list(by_full), n=1, cutoff=0.5)
        if match:
            return by_full[match[0]]
        by_name = {i.split("/", 1)[1].lower(): i for i in ids}
        match = difflib.get_close_matches(key.split("/")[-1], list(by_name), n=1, cutoff=0.5)
        return by_name[match[0]] if match else None


def load_served(folder: Path, models: Sequence[str] | None = None) -> Catalog:
    """The catalog a server or a gateway starts with: invalid files and ``--models`` ids that are
    not in the folder are refused (CatalogError), not logged and skipped."""
    catalog = Catalog(folder, set(models) if models else None)
    if catalog.errors:
        raise CatalogError("the catalog has invalid files:\n" + "\n".join(catalog.errors.values()))
    served = {c.id for c in catalog.list()}
    unknown = sorted(m for m in models or () if canonical_id(m) not in served)
    if unknown:
        raise CatalogError(f"--models names ids that are not in {folder}: {', '.join(unknown)}")
    return catalog
