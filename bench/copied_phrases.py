"""Which turns of a labelled routing set repeat a phrase quoted in the skills' data, code,
READMEs or tests: step 4 of how the sets of ``bench/data/routing/`` are written.

A turn copied from ``intents.json``, ``persona.json`` or a skill's test is matched by
construction, so a set made of such turns measures the phrases the skills were built from,
not a stranger's wording. The writer of a new set runs this before anything else reads the
set, and rewords what it lists (bare greetings and thanks, and three-word pieces of grammar
such as "my name is", may stay). It prints the set's own turns and the files they match,
never a line of those files, so a blind writer reads nothing of the other sets.

    .venv/bin/python -m bench.copied_phrases bench/data/routing/fresh7.jsonl
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.routing import Conversation, load_set

ROOT = Path(__file__).resolve().parents[1]
#: The skills' own data, which every phrase of theirs comes from.
DATA_FILES = (
    "annotators/intents/intents.json",
    "skills/faq/faq.json",
    "skills/smalltalk/persona.json",
)
#: Folders whose code, READMEs and tests quote the phrases the skills were built and
#: checked on.
FOLDERS = ("skills", "annotators", "skill_selectors", "response_selectors", "tests")
SUFFIXES = frozenset({".py", ".md", ".json", ".yaml", ".yml", ".txt"})
#: A quoted string: in double, single or curly quotes, on one line.
_QUOTED = re.compile(
    r'"((?:[^"\\\n]|\\.){3,300})"|\'((?:[^\'\\\n]|\\.){3,300})\'|“([^”\n]{3,300})”'
)
_WORD = re.compile(r"[a-z0-9à-ÿ']+")
#: The fewest words a phrase holds to count when it is only part of a turn (or a turn only
#: part of it): two words ("thank you") are shared by chance.
PART = 3

Words = tuple[str, ...]


def words(text: str) -> Words:
    """The words of a text, lowercased, without punctuation or quotes around them."""
    found = (word.strip("'") for word in _WORD.findall(text.lower()))
    return tuple(word for word in found if word)


def sources(root: Path) -> list[Path]:
    """The files whose quoted strings a set's turns must not repeat."""
    paths = [root / name for name in DATA_FILES]
    for folder in FOLDERS:
        paths.extend(
            path
            for path in sorted((root / folder).rglob("*"))
            if path.suffix in SUFFIXES and path.is_file() and path not in paths
        )
    return paths


def quoted_phrases(root: Path, paths: Iterable[Path]) -> dict[Words, set[str]]:
    """Every quoted string of the files, as words, with the files (relative) that hold it."""
    phrases: dict[Words, set[str]] = {}
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for match in _QUOTED.finditer(text):
            quoted = next(group for group in match.groups() if group is not None)
            if phrase := words(quoted):
                phrases.setdefault(phrase, set()).add(str(path.relative_to(root)))
    return phrases


def _inside(longer: Words, shorter: Words) -> bool:
    size = len(shorter)
    return any(longer[at : at + size] == shorter for at in range(len(longer) - size + 1))


def matches(turn: Words, phrases: Mapping[Words, set[str]]) -> list[str]:
    """How a turn of two words or more repeats the phrases, one line per file and way:
    the same words, a phrase of ``PART`` words or more inside the turn, or the turn inside
    a longer phrase."""
    if len(turn) < 2:
        return []
    found: set[str] = set()
    for phrase, files in phrases.items():
        if phrase == turn:
            found.update(f"the same as a string of {name}" for name in files)
        elif PART <= len(phrase) < len(turn) and _inside(turn, phrase):
            found.update(f"holds a {len(phrase)}-word string of {name}" for name in files)
        elif PART <= len(turn) < len(phrase) and _inside(phrase, turn):
            found.update(f"is inside a string of {name}" for name in files)
    return sorted(found)


@dataclass(frozen=True)
class Copied:
    """A turn of the set that repeats a quoted phrase, and how."""

    conversation: str
    user: str
    how: list[str]


def copied(
    conversations: Iterable[Conversation], phrases: Mapping[Words, set[str]]
) -> list[Copied]:
    """The set's turns that repeat a phrase, in the set's order."""
    return [
        Copied(conversation.id, turn.user, how)
        for conversation in conversations
        for turn in conversation.turns
        if (how := matches(words(turn.user), phrases))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", type=Path, help="a labelled set (.jsonl)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository")
    args = parser.parse_args(argv)
    found = copied(load_set(args.set), quoted_phrases(args.root, sources(args.root)))
    for turn in found:
        print(f"{turn.conversation} {turn.user!r}")
        for how in turn.how:
            print(f"    {how}")
    print(f"{len(found)} of the set's turns repeat a quoted phrase")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
