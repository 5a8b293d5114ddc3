"""First names of many languages: a name given in words the skills do not read.

"mi chiamo Giulia", "ik ben Sanne", "sunt Andrei", "mera naam Pooja hai": after the bot
asked for the user's name, people answer in their own language, and the skill's English
phrases ("my name is", "I'm") miss them. The name itself is the one word of such a reply
that is a first name. Which words are first names comes from ``faker`` (MIT), whose person
providers list the first names of 85 locales; importing them all takes seconds, so the
list is read once from the package into ``first_names.txt`` beside this file (lowercase,
one a line, Latin letters only: the skill reads names in those), and the skill loads that
file. The greeting takes the first name of a reply to its name question; small talk does
not nod to a bare name as to a word it cannot read (skills/smalltalk/unread.py). ``faker``
is a development dependency only (the ``dev`` extra): regenerate with

    .venv/bin/python -m shared.first_names
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import numpy as np

NAMES_FILE = Path(__file__).parent / "first_names.txt"
#: The attributes of faker's person providers that list first names.
_ATTRIBUTES = ("first_names", "first_names_male", "first_names_female", "first_names_nonbinary")
#: A name the greeting can take: the letters of its name pattern (``_WORD`` in
#: skills/greeting/app.py).
_LATIN = re.compile(r"[A-Za-zÀ-ÿ'-]{2,30}")


class Names:
    """A set of names that only answers ``name in names``, held as one sorted NumPy array
    of their UTF-8 bytes (20,052 names, 0.3 MB), looked up by bisection: a frozenset of
    them was 3 MB of the served agent (20,052 string objects and the set's table;
    docs/performance.md, "The served agent's memory"). A word is in it exactly when it is
    one of the names, as in the set: equal UTF-8 bytes are equal strings."""

    def __init__(self, names: Iterable[str]) -> None:
        self._sorted = np.array(sorted({name.encode() for name in names}), dtype=np.bytes_)

    def __len__(self) -> int:
        return len(self._sorted)

    def __contains__(self, word: object) -> bool:
        # NumPy's fixed-width bytes drop trailing NULs: a word with one is no name
        if not isinstance(word, str) or "\0" in word:
            return False
        try:
            key = word.encode()
        except UnicodeEncodeError:  # a lone surrogate: no name has one
            return False
        at = self._sorted.searchsorted(key)
        return bool(at < len(self._sorted) and self._sorted[at] == key) and key != b""


@cache
def first_names() -> Names:
    """The lowercase first names of ``first_names.txt``."""
    return Names(NAMES_FILE.read_text(encoding="utf-8").split())


def from_faker() -> list[str]:
    """Every first name of faker's person providers, lowercase, Latin letters, sorted."""
    # a development dependency, imported only to write the file
    import faker.providers.person as person

    found: set[str] = set()
    for module in pkgutil.iter_modules(person.__path__):
        provider = getattr(
            importlib.import_module(f"{person.__name__}.{module.name}"), "Provider", None
        )
        for klass in getattr(provider, "__mro__", ()):
            for attribute in _ATTRIBUTES:
                names = klass.__dict__.get(attribute)
                if isinstance(names, list | tuple | dict | set | frozenset):
                    found.update(str(name) for name in names)
    return sorted({name.lower() for name in found if _LATIN.fullmatch(name)})


def main() -> None:
    names = from_faker()
    NAMES_FILE.write_text("\n".join(names) + "\n", encoding="utf-8")
    print(f"{len(names)} first names -> {NAMES_FILE}")


if __name__ == "__main__":
    main()
