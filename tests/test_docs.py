"""README.md stays a front door, and every relative link in it and in docs/ resolves.

MkDocs (`make docs`, strict) checks links between pages of the site; README.md is outside the
site, so its links - into docs/ and to files of the repository - are checked here, and docs/
links are checked too so that a broken one fails the test suite as well as the docs build.
Anchors (`page.md#section`) must name a heading of the page, slugged as MkDocs' table of
contents slugs it, or an explicit `{#id}`.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README_MAX_LINES = 300

# [text](target) and ![alt](target); a target ends at whitespace or ")" (no titles are used)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.M)
EXPLICIT_ID = re.compile(r"\{:?\s*#([\w-]+)\s*\}")


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def slug(heading: str) -> str:
    """Python-Markdown's toc slugify (MkDocs' default) over a heading's text."""
    text = EXPLICIT_ID.sub("", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found = {slug(h) for h in HEADING.findall(text)}
    return found | set(EXPLICIT_ID.findall(text))


def relative_links(page: Path) -> list[str]:
    text = INLINE_CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    return broken


def test_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)}: {broken_links(page)}"


def test_the_link_check_catches_a_broken_file_and_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# A page\n\n## Setup: `make docs`\n\nText.\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#setup-make-docs) [file](missing.md) [anchor](a.md#nope) "
                    "`[code](skipped.md)` [web](https://example.org/x)\n")
    assert broken_links(page) == ["missing.md: no such file", "a.md#nope: no heading with anchor #nope"]


def test_every_docs_page_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert not {p for p in pages if p not in nav}, "add these pages to the nav in mkdocs.yml"
