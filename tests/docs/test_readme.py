"""The README is the front page: under 200 lines, the two commands first, and every link into the site or the
repository points at a file that exists (mkdocs checks the site's own links; nothing else checks these)."""

from __future__ import annotations

import re

from tests.docs.hooks import ROOT

README = (ROOT / "README.md").read_text()


def test_the_readme_is_short_and_opens_with_the_two_commands() -> None:
    assert len(README.splitlines()) < 200
    first_block = README.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split()[:2] for line in first_block] == [["make", "serve"], ["make", "test"]]


def test_every_relative_link_of_the_readme_exists() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    relative = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert len(relative) > 10
    for link in relative:
        assert (ROOT / link).exists(), link
