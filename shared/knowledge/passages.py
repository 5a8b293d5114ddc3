"""A folder of documents as passages: the unit a knowledge base retrieves and cites.

Each file is read with a library made for its format (markdown-it-py finds Markdown's
headings, BeautifulSoup with lxml reads HTML's, pypdf a PDF's text page by page); plain
text has no headings. A section (the text under its deepest heading) becomes one passage,
or several when it is long: a passage holds whole paragraphs up to :data:`PASSAGE_CHARS`,
so its best sentences stay close to the question they answer, and every one keeps the
section's heading path ("Backup and restore > Restoring"), which is what an answer cites.

A file that cannot be read (not UTF-8, a broken PDF, over :data:`MAX_FILE_BYTES`) is
named in :attr:`Corpus.skipped` with the reason and left out; the build says so instead
of dropping it silently.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: Files bigger than this are skipped: a knowledge base is documents, not data dumps, and
#: one huge file would hold the build (and the index) hostage.
MAX_FILE_BYTES = 10 * 1024 * 1024
#: A passage grows by whole paragraphs up to about this many characters.
PASSAGE_CHARS = 600
#: The most passages one index holds (documented in docs/knowledge.md): 100,000 fit the
#: retrieval time target; past that, a vector engine (docs/knowledge.md, "A large corpus").
MAX_PASSAGES = 200_000
#: The file formats read, by suffix.
SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html"}
SUFFIXES |= {".txt": "text", ".text": "text", ".rst": "text", ".pdf": "pdf"}

_BLANK_LINES = re.compile(r"\n\s*\n")
_SPACES = re.compile(r"[ \t]+")


class Passage(BaseModel):
    """One retrievable piece of a document."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(description="the file, relative to the knowledge base's folder")
    headings: list[str] = Field(description="the heading path, outermost first")
    text: str
    anchor: str | None = Field(default=None, description="the section's fragment in a link")

    @property
    def section(self) -> str:
        """The deepest heading ("" for text before the first heading)."""
        return self.headings[-1] if self.headings else ""

    @property
    def digest(self) -> str:
        """What the embedding depends on: an unchanged passage keeps its embedding."""
        return hashlib.sha256(self.searchable.encode()).hexdigest()[:32]

    @property
    def searchable(self) -> str:
        """The text searched: the file's name and headings say what a section is about
        as much as its words ("backup.md", "Restoring")."""
        name = Path(self.source).stem.replace("-", " ").replace("_", " ")
        return f"{name}. {' > '.join(self.headings)}. {self.text}"

    @property
    def link(self) -> str:
        """Where to read it: the file, and the section's fragment when it has one."""
        return f"{self.source}#{self.anchor}" if self.anchor else self.source


class Corpus(BaseModel):
    """What a folder gave: its passages, and the files left out with why."""

    passages: list[Passage] = Field(default_factory=list)
    skipped: dict[str, str] = Field(default_factory=dict)


class UnreadableFile(ValueError):
    """The file cannot be turned into text; the message says why."""


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces as hyphens."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def paragraphs_to_passages(
    source: str, headings: list[str], text: str, anchor: str | None
) -> Iterator[Passage]:
    """Whole paragraphs, joined up to :data:`PASSAGE_CHARS` per passage."""
    paragraphs = [_SPACES.sub(" ", p).strip() for p in _BLANK_LINES.split(text)]
    chunk: list[str] = []
    size = 0
    for paragraph in (p for p in paragraphs if p):
        if chunk and size + len(paragraph) > PASSAGE_CHARS:
            yield Passage(source=source, headings=headings, text="\n\n".join(chunk), anchor=anchor)
            chunk, size = [], 0
        chunk.append(paragraph)
        size += len(paragraph)
    if chunk:
        yield Passage(source=source, headings=headings, text="\n\n".join(chunk), anchor=anchor)


def _markdown_to_text(markdown: str) -> str:
    """Rendered by markdown-it-py and read back as text: no `**`, link targets or fences."""
    from bs4 import BeautifulSoup
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(markdown)
    soup = BeautifulSoup(html, "lxml")
    for table in soup.find_all("table"):
        table.replace_with(soup.new_string(_table_text(table)))
    for block in soup.find_all(["p", "li", "pre", "tr", "h1", "h2", "h3", "h4", "h5", "h6"]):
        block.append("\n\n")
    return soup.get_text()


def _table_text(table: Any) -> str:
    """A table as paragraphs, a row each, every cell named by its column's header
    ("key: <service>.connector.timeout; meaning: seconds per call; default: 2.0."): a
    passage cut out of the middle of a long table keeps what its values mean."""
    header = [cell.get_text(" ", strip=True) for cell in table.find_all("th")]
    rows = []
    for row in table.find_all("tr"):
        cells = [cell.get_text(" ", strip=True) for cell in row.find_all("td")]
        if not cells:
            continue
        named = [
            f"{name}: {value}" if name else value
            for name, value in zip([*header, *[""] * len(cells)], cells, strict=False)
            if value
        ]
        row_text = "; ".join(named)
        # a full stop ends the row's sentence: two rows quoted together read as two
        rows.append(row_text if row_text.endswith((".", "!", "?")) else f"{row_text}.")
    return "\n\n" + "\n\n".join(rows) + "\n\n"


def _inline_text(markdown: str) -> str:
    """A heading's text without its marks ("1. Create it" stays a heading, not a list)."""
    from bs4 import BeautifulSoup
    from markdown_it import MarkdownIt

    return BeautifulSoup(MarkdownIt("commonmark").renderInline(markdown), "lxml").get_text().strip()


def markdown_passages(source: str, markdown: str) -> Iterator[Passage]:
    """Sections under their heading paths, from markdown-it-py's heading tokens."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    lines = markdown.splitlines()
    # (level, heading text, first line of the heading, first line after it)
    marks: list[tuple[int, str, int, int]] = []
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.map is not None:
            inline = tokens[index + 1]
            marks.append((int(token.tag[1]), inline.content.strip(), token.map[0], token.map[1]))
    path: list[tuple[int, str]] = []
    start = 0
    current: list[str] = []
    anchor: str | None = None
    for level, title, first, after in [*marks, (0, "", len(lines), len(lines))]:
        body = "\n".join(lines[start:first])
        text = _markdown_to_text(body) if body.strip() else ""
        yield from paragraphs_to_passages(source, current, text, anchor)
        if level == 0:
            break
        path = [(lvl, name) for lvl, name in path if lvl < level]
        path.append((level, _inline_text(title)))
        current = [name for _, name in path]
        anchor = slug(current[-1])
        start = after


def html_passages(source: str, html: str) -> Iterator[Passage]:
    """Sections under h1-h6, read with BeautifulSoup (lxml's parser); scripts, styles and
    navigation are not content."""
    from bs4 import BeautifulSoup, Tag

    soup = BeautifulSoup(html, "lxml")
    for noise in soup.find_all(["script", "style", "nav", "header", "footer", "template"]):
        noise.decompose()
    body = soup.body or soup
    path: list[tuple[int, str]] = []
    current: list[str] = []
    anchor: str | None = None
    pieces: list[str] = []
    headings = {"h1", "h2", "h3", "h4", "h5", "h6"}
    blocks = {"p", "li", "pre", "td", "th", "dd", "dt", "blockquote"}
    for element in body.find_all([*headings, *blocks]):
        if not isinstance(element, Tag):
            continue
        if element.name in headings:
            yield from paragraphs_to_passages(source, current, "\n\n".join(pieces), anchor)
            pieces = []
            level = int(element.name[1])
            path = [(lvl, name) for lvl, name in path if lvl < level]
            path.append((level, element.get_text(" ", strip=True)))
            current = [name for _, name in path]
            found = element.get("id")
            anchor = found if isinstance(found, str) else slug(current[-1])
        elif element.find_parent(list(blocks)) is None:  # a nested block is in its parent's text
            pieces.append(element.get_text(" ", strip=True))
    yield from paragraphs_to_passages(source, current, "\n\n".join(pieces), anchor)


def pdf_passages(source: str, path: Path) -> Iterator[Passage]:
    """A PDF's text by pypdf, one heading per page ("page 3"): PDFs keep no headings that
    a library reads reliably, and a page is what a reader can turn to."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(path)
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, OSError) as exc:
        raise UnreadableFile(f"not a readable PDF ({type(exc).__name__}: {exc})") from None
    if not any(page.strip() for page in pages):
        raise UnreadableFile("the PDF holds no text (a scan needs OCR first)")
    for number, text in enumerate(pages, start=1):
        yield from paragraphs_to_passages(source, [f"page {number}"], text, f"page={number}")


def file_passages(source: str, path: Path) -> list[Passage]:
    """The passages of one file; :class:`UnreadableFile` says why it has none."""
    file_format = SUFFIXES.get(path.suffix.lower())
    if file_format is None:
        raise UnreadableFile(f"not a format read here ({', '.join(sorted(SUFFIXES))})")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UnreadableFile(f"{size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit")
    if file_format == "pdf":
        return list(pdf_passages(source, path))
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if file_format == "markdown":
        return list(markdown_passages(source, text))
    if file_format == "html":
        return list(html_passages(source, text))
    return list(paragraphs_to_passages(source, [], text, None))


def read_folder(folder: Path, prefix: str = "") -> Corpus:
    """Every readable file under ``folder`` (sorted, hidden ones left out) as passages.
    ``prefix`` goes before each source ("docs/" makes "docs/backup.md")."""
    if not folder.is_dir():
        raise UnreadableFile(f"{folder} is not a folder")
    corpus = Corpus()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if not path.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        source = prefix + relative.as_posix()
        if path.suffix.lower() not in SUFFIXES:
            if path.suffix.lower() not in {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp"}:
                corpus.skipped[source] = f"not a format read here ({', '.join(sorted(SUFFIXES))})"
            continue
        try:
            corpus.passages.extend(file_passages(source, path))
        except UnreadableFile as exc:
            corpus.skipped[source] = str(exc)
    return corpus


def source_name(path: Path, base: Path) -> str:
    """How a file is named in citations: its path from ``base`` (the folder the build runs
    in, so the shipped docs are "docs/backup.md" and "README.md"), or from its folder's
    parent when it lies outside ``base``."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(base.resolve()).as_posix()
    except ValueError:
        anchor = resolved.parent if resolved.is_dir() else resolved.parent.parent
        return resolved.relative_to(anchor).as_posix()


def read_paths(paths: list[Path], base: Path) -> Corpus:
    """The passages of several folders and files, named by :func:`source_name`."""
    corpus = Corpus()
    for path in paths:
        if path.is_dir():
            prefix = source_name(path, base).rstrip("/") + "/"
            part = read_folder(path, prefix="" if prefix == "./" else prefix)
        elif path.is_file():
            part = Corpus()
            source = source_name(path, base)
            try:
                part.passages = file_passages(source, path)
            except UnreadableFile as exc:
                part.skipped[source] = str(exc)
        else:
            raise UnreadableFile(f"{path} is not a folder or a file")
        corpus.passages.extend(part.passages)
        corpus.skipped.update(part.skipped)
    return corpus
