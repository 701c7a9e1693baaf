"""MkDocs hook: a page takes a section of a Markdown file kept elsewhere in the repository, at build time.

``<!-- include: deploy/README.md#Images -->`` is replaced by the body of the section headed ``Images`` in
``deploy/README.md`` (its heading line left out, up to the next heading of the same or a higher level);
``<!-- include: benchmarks/RESULTS.md -->`` by the whole file less its first ``#`` title. So the deploy guide
beside the chart and the benchmark results stay the one copy, and the site shows them as they are.
A missing file or section stops the build.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DIRECTIVE = re.compile(r"^<!-- include: (?P<path>[\w./-]+?)(?:#(?P<section>[^>]+?))? -->$", re.M)
HEADING = re.compile(r"^(?P<level>#{1,6}) +(?P<title>.+?) *$")


def section(text: str, title: str | None) -> str:
    """The body under the heading ``title`` (all of ``text`` less a leading ``# `` title when None)."""
    lines = text.splitlines()
    if title is None:
        if lines and lines[0].startswith("# "):
            lines = lines[1:]
        return "\n".join(lines).strip("\n")
    fenced = False
    start, level = None, 0
    for index, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        found = None if fenced else HEADING.match(line)
        if found is None:
            continue
        if start is None and found["title"] == title:
            start, level = index + 1, len(found["level"])
        elif start is not None and len(found["level"]) <= level:
            return "\n".join(lines[start:index]).strip("\n")
    if start is None:
        raise ValueError(f"no section headed {title!r}")
    return "\n".join(lines[start:]).strip("\n")


def expand(markdown: str, root: Path = ROOT) -> str:
    def one(match: re.Match[str]) -> str:
        path = root / match["path"]
        try:
            return section(path.read_text(), match["section"])
        except (OSError, ValueError) as exc:
            raise ValueError(f"include {match['path']}#{match['section']}: {exc}") from exc

    return DIRECTIVE.sub(one, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **kwargs: Any) -> str:
    return expand(markdown)
