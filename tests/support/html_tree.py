"""An HTML page as a tree of elements, parsed with the standard library, so that a test
asserts on a page's structure (its sections, tables, links) rather than on its text."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

#: Elements without an end tag.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The text inside, its spacing collapsed."""
        parts = [c if isinstance(c, str) else c.text for c in self.children]
        return " ".join(" ".join(parts).split())

    def iter(self, tag: str | None = None) -> Iterator[Element]:
        """The elements inside (not this one), in document order, of ``tag`` if given."""
        for child in self.children:
            if isinstance(child, Element):
                if tag is None or child.tag == tag:
                    yield child
                yield from child.iter(tag)

    def by_id(self, id_: str) -> Element:
        found = [e for e in self.iter() if e.attrs.get("id") == id_]
        assert len(found) == 1, f"{len(found)} elements with id {id_!r}"
        return found[0]

    def rows(self) -> list[list[str]]:
        """The text of each cell of each row of the tables inside, headings included."""
        return [[cell.text for cell in row.children if isinstance(cell, Element)]
                for row in self.iter("tr")]  # fmt: skip


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("document", {})
        self.open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.open[-1].children.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        assert self.open[-1].tag == tag, f"</{tag}> closes <{self.open[-1].tag}>"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.open[-1].children.append(data)


def parse(page: str) -> Element:
    """The page's tree; an end tag that closes another element than the last opened fails."""
    builder = _Builder()
    builder.feed(page)
    builder.close()
    assert builder.open == [builder.root], "elements left open"
    return builder.root
