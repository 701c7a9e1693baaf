"""Generate the SDK's blocking client (``sdk/sie_sdk/_sync.py``) from its asyncio client (``_async.py``).

Each method of the two clients is written once, in ``_async.py`` (the public methods) and
``_async_transport.py`` (sending with retries, reading a stream); this script derives the blocking
``_sync.py`` and ``_sync_transport.py`` from them token by token, in the manner of ``unasync``:

- the keywords ``async`` and ``await`` are dropped (``async def`` -> ``def``, ``async for``
  -> ``for``, ``await x`` -> ``x``);
- every name in ``NAMES`` is renamed (``AsyncIterator`` -> ``Iterator``, ``aclose`` ->
  ``close``, ``asyncio`` -> ``time`` so ``asyncio.sleep`` becomes ``time.sleep``, ...);
- in docstrings and comments, each phrase in ``PHRASES`` is replaced (each must still occur
  in the source), then code quoted as ````a.b.c```` is renamed like code.

The result must not mention async or await anywhere but in its source's file name; otherwise
a rule is missing and the script fails. The output gets a "generated" header and is sorted and
formatted with ruff.

    python scripts/gen_sync_client.py          # rewrite sdk/sie_sdk/_sync.py and _sync_transport.py
    python scripts/gen_sync_client.py --check  # exit 1 if a checked-in file is stale
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
SDK: Final = ROOT / "sdk" / "sie_sdk"
SOURCE: Final = SDK / "_async.py"
TARGET: Final = SDK / "_sync.py"
TRANSPORT_SOURCE: Final = SDK / "_async_transport.py"
TRANSPORT_TARGET: Final = SDK / "_sync_transport.py"
REGENERATE: Final = "make sync-client"

NAMES: Final[Mapping[str, str]] = {
    "SIEAsyncClient": "SIEClient",
    "AsyncIterator": "Iterator",
    "AsyncClient": "Client",
    "AsyncBaseTransport": "BaseTransport",
    "asyncio": "time",
    "aclose": "close",
    "aread": "read",
    "aiter_lines": "iter_lines",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "_async_transport": "_sync_transport",
}
PHRASES: Final[Sequence[tuple[str, str]]] = (
    ("The asyncio client:", "The blocking client:"),
    (
        "The blocking client, ``_sync.py``, is generated from this file: edit here,",
        "Generated from ``_async.py`` by ``scripts/gen_sync_client.py``: edit that file,",
    ),
    (
        "Asyncio client for an SIE server; the same methods as ``SIEClient``, awaited.",
        "Blocking client for an SIE server.",
    ),
)
TRANSPORT_PHRASES: Final[Sequence[tuple[str, str]]] = (
    (
        "The asyncio client's I/O: one call's attempts sent with ``httpx.AsyncClient.send`` and ``asyncio.sleep``,",
        "The blocking client's I/O: one call's attempts sent with ``httpx.Client.send`` and ``time.sleep``,",
    ),
    (
        "``_sync_transport.py`` is generated from this file: edit here,",
        "Generated from _async_transport.py by ``scripts/gen_sync_client.py``: edit that file,",
    ),
)
_DROPPED: Final = frozenset({"async", "await"})
_QUOTED_CODE: Final = re.compile(r"``([A-Za-z_][\w.]*)``")
_LEFTOVER: Final = re.compile(r"async|await", re.IGNORECASE)


class GenerationError(Exception):
    """The rules no longer fit ``_async.py``: a phrase is gone, or async code is left."""


@dataclass(frozen=True)
class Pair:
    """One generated module: its async source, its blocking target, and the prose rules for its docstrings."""

    source: Path
    target: Path
    phrases: Sequence[tuple[str, str]]


PAIRS: Final = (Pair(SOURCE, TARGET, PHRASES), Pair(TRANSPORT_SOURCE, TRANSPORT_TARGET, TRANSPORT_PHRASES))


def header(source: Path) -> str:
    return (
        f"# Generated from sdk/sie_sdk/{source.name} by scripts/gen_sync_client.py; do not edit.\n"
        f"# Edit {source.name}, then regenerate with `{REGENERATE}`.\n"
    )


def unasync(
    source: str,
    names: Mapping[str, str] = NAMES,
    phrases: Sequence[tuple[str, str]] = PHRASES,
    source_name: str = SOURCE.name,
) -> str:
    """``source`` with ``async``/``await`` dropped and the rename rules applied."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        row, col = position
        return starts[min(row - 1, len(starts) - 1)] + col

    used: set[str] = set()
    out: list[str] = []
    previous_end = 0
    drop_space = False
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        start, end = offset(token.start), offset(token.end)
        space = "" if drop_space else source[previous_end:start]
        previous_end = end
        drop_space = token.type == tokenize.NAME and token.string in _DROPPED
        if drop_space:
            out.append(space)  # the keyword and the space after it go
        elif token.type == tokenize.NAME:
            out.append(space + names.get(token.string, token.string))
        elif token.type in (tokenize.STRING, tokenize.COMMENT):
            out.append(space + _rewrite_text(source[start:end], names, phrases, used))
        else:
            out.append(space + source[start:end])
    unused = [old for old, _ in phrases if old not in used]
    if unused:
        raise GenerationError(f"phrase rules that match nothing in the async source: {unused}")
    result = "".join(out)
    leftover = sorted({match.group(0) for match in _LEFTOVER.finditer(result.replace(source_name, ""))})
    if leftover:
        raise GenerationError(f"the generated client still says {leftover}: add a rule to scripts/gen_sync_client.py")
    return result


def _rewrite_text(text: str, names: Mapping[str, str], phrases: Sequence[tuple[str, str]], used: set[str]) -> str:
    for old, new in phrases:
        if old in text:
            used.add(old)
            text = text.replace(old, new)

    def rename(match: re.Match[str]) -> str:
        return "``" + ".".join(names.get(part, part) for part in match.group(1).split(".")) + "``"

    return _QUOTED_CODE.sub(rename, text)


def _ruff(args: Sequence[str], source: str, target: Path) -> str:
    command = [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(target), "-"]
    done = subprocess.run(command, input=source, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise GenerationError(f"{' '.join(args)} failed on the generated client:\n{done.stderr}{done.stdout}")
    return done.stdout


def generate(source: str, pair: Pair = PAIRS[0]) -> str:
    """The full text of ``pair.target`` (by default ``_sync.py``) for the given text of ``pair.source``."""
    code = header(pair.source) + unasync(source, phrases=pair.phrases, source_name=pair.source.name)
    code = _ruff(["check", "--fix", "--select", "I", "--quiet", "--exit-zero"], code, pair.target)
    return _ruff(["format", "--quiet"], code, pair.target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if a checked-in generated file is stale")
    check = parser.parse_args(argv).check
    stale = False
    for pair in PAIRS:
        try:
            wanted = generate(pair.source.read_text(encoding="utf-8"), pair)
        except GenerationError as error:
            print(f"error: {pair.source.name}: {error}", file=sys.stderr)
            return 1
        current = pair.target.read_text(encoding="utf-8") if pair.target.exists() else ""
        if current == wanted:
            continue
        if check:
            print(f"{pair.target.relative_to(ROOT)} is stale: run `{REGENERATE}`", file=sys.stderr)
            stale = True
        else:
            pair.target.write_text(wanted, encoding="utf-8")
            print(f"wrote {pair.target.relative_to(ROOT)}")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
