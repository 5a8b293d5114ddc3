"""Every link between the project's Markdown pages leads somewhere: to a file that exists
and, when it names a section, to a heading of that file. Pages move sections between
them (docs/ keeps what is true now, bench/journal/ each pass's figures), and a link left
pointing at a moved heading lands a reader at the top of a long page instead."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from shared.knowledge.passages import slug

ROOT = Path(__file__).resolve().parents[1]
#: Folders that hold no page of the project's own: installed packages, caches, tools' state.
SKIPPED = frozenset({"node_modules", "results"})
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE = re.compile(r"`[^`]*`")
_HEADING = re.compile(r"#{1,6} (.*)")


def pages() -> list[Path]:
    return sorted(
        path
        for path in ROOT.rglob("*.md")
        if not any(part.startswith(".") or part in SKIPPED for part in path.relative_to(ROOT).parts)
    )


def prose(path: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, numbered."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors a Markdown renderer gives the page's headings, as GitHub makes them
    (:func:`shared.knowledge.passages.slug`, as the knowledge base's citations link
    them), a repeated one numbered."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose(path):
        if heading := _HEADING.match(line):
            anchor = slug(heading.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.add(anchor if count == 0 else f"{anchor}-{count}")
    return frozenset(found)


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for number, line in prose(page):
        for target in _LINK.findall(_CODE.sub("", line)):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(root)}:{number}: {target}"
            if not destination.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
                broken.append(f"{where} (no such heading)")
    return broken


def test_every_link_between_the_pages_leads_to_a_file_and_heading_that_exist() -> None:
    found = pages()
    assert ROOT / "README.md" in found and ROOT / "docs" / "performance.md" in found
    broken = [link for page in found for link in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_a_link_to_a_heading_or_a_file_that_is_gone_is_named(tmp_path: Path) -> None:
    """The check itself, on two pages: a moved section's old anchor and a missing file are
    named with their line; a heading with code and punctuation, a repeated one, a link to
    the page's own heading, one inside code, and a web address pass."""
    (tmp_path / "b.md").write_text("# B\n\n## The `run_below`, measured (2026)\n\n## B\n")
    (tmp_path / "a.md").write_text(
        "# A\n"
        "[ok](b.md#the-run_below-measured-2026) [ok](b.md#b-1) [ok](#a) [web](https://x.org/#y)\n"
        "[moved](b.md#the-twenty-fifth-pass) `[code](gone.md)`\n"
        "```\n[fenced](gone.md)\n```\n"
        "[missing](c.md)\n"
    )
    assert broken_links(tmp_path / "a.md", tmp_path) == [
        "a.md:3: b.md#the-twenty-fifth-pass (no such heading)",
        "a.md:7: c.md (no such file)",
    ]
