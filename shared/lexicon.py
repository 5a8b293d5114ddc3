"""Find the entries of a bad-words list in a text: whole words, forgiving of simple disguises.

Shared by the ``badwords`` annotator (the user's utterance), the ``toxicity`` candidate
annotator (the skills' hypotheses) and the smalltalk skill (which tells no joke the
toxicity annotator would flag), so all of them judge by exactly the same words.

An entry is a word or a phrase (words separated by spaces). It matches case-insensitively,
as whole words only ("ass" is not found in "class" or "assess"), and also:

* with a plural ``-s``/``-es``: "idiots", "bitches";
* with stretched letters: "idiooot", "stuuupid";
* with any punctuation or spacing between a phrase's words: "son-of-a-bitch", "shut   up";
* with punctuation around it: "idiot!!!", "(moron)".

Each entry becomes one regex; all are tried in one alternation, longest first, so a phrase
wins over a word inside it. A run of a letter is matched possessively (``s{2,}+``), which
keeps the scan linear however long a run the text holds: no catastrophic backtracking. The
text is lowercased once rather than matched with ``re.IGNORECASE``, and the alternation is
entered at word starts, bundled by first letter, so a chat line costs little and the worst
case, a text at the agent's default limit made of near misses ("son of a son of a ..."),
stays within a turn's budget (docs/performance.md, "Figures behind the code's choices").
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from pathlib import Path

#: The shipped list, read by both annotators and the smalltalk skill.
BADWORDS_FILE = Path(__file__).parent / "badwords.txt"

_COMMENT = "#"
_BETWEEN_WORDS = r"[\W_]++"
_PLURAL = r"(?:e?s)?"


def _word_pattern(word: str) -> str:
    """'ass' -> 'a++s{2,}+': each run of a letter may be stretched, never shortened."""
    parts = []
    for char, run in itertools.groupby(word):
        count = len(list(run))
        quantifier = "++" if count == 1 else f"{{{count},}}+"
        parts.append(re.escape(char) + quantifier)
    return "".join(parts)


def _entry_pattern(entry: str) -> str:
    """The entry's words, then an optional plural, then the end of a word."""
    words = _BETWEEN_WORDS.join(_word_pattern(w) for w in entry.split(" "))
    return rf"{words}{_PLURAL}(?!\w)"


def _scanner(entries: list[str]) -> re.Pattern[str]:
    """One regex for all entries, each a named group ``e<index>``, tried at word starts.

    Entries are bundled by first letter behind a one-letter lookahead, so at a word start
    the engine tries only the entries that can begin there, not all of them.
    """
    by_letter: dict[str, list[str]] = {}
    for index, entry in enumerate(entries):
        by_letter.setdefault(entry[0], []).append(f"(?P<e{index}>{_entry_pattern(entry)})")
    bundles = [
        f"(?={re.escape(letter)})(?:{'|'.join(group)})" for letter, group in by_letter.items()
    ]
    if not bundles:
        return re.compile("(?!)")  # an empty list matches nothing
    return re.compile(rf"(?<!\w)(?:{'|'.join(bundles)})")


def _normalise(entry: str) -> str:
    return " ".join(entry.lower().split())


class Lexicon:
    """A list of bad words and phrases, and the one regex that finds them."""

    def __init__(self, entries: Iterable[str]) -> None:
        unique = dict.fromkeys(e for e in map(_normalise, entries) if e)
        self.entries: list[str] = sorted(unique, key=len, reverse=True)
        self._scanner = _scanner(self.entries)

    @classmethod
    def from_file(cls, path: Path) -> Lexicon:
        """One entry per line; blank lines and lines starting with '#' are skipped."""
        lines = path.read_text(encoding="utf-8").splitlines()
        return cls(line for line in lines if not line.lstrip().startswith(_COMMENT))

    def find(self, text: str) -> list[str]:
        """The entries found in ``text``, lowercase, each once, in order of first appearance."""
        found: dict[str, None] = {}
        for match in self._scanner.finditer(text.lower()):
            assert match.lastgroup is not None  # every alternative is a named group
            found[self.entries[int(match.lastgroup[1:])]] = None
        return list(found)

    def __len__(self) -> int:
        return len(self.entries)
