"""The first names the greeting and small talk read (shared.first_names), held compactly."""

import json
from pathlib import Path

from shared.first_names import NAMES_FILE, Names, first_names

ROUTING = Path(__file__).resolve().parents[2] / "bench" / "data" / "routing"


def test_a_word_is_a_name_exactly_when_the_file_lists_it() -> None:
    """Every name of the file is found, and every word of the routing sets' turns is found
    exactly when the file lists it, in the case it is typed."""
    listed = frozenset(NAMES_FILE.read_text(encoding="utf-8").split())
    names = first_names()
    assert len(names) == len(listed) and all(name in names for name in listed)
    words = {
        word
        for path in ROUTING.glob("*.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
        for turn in json.loads(line)["turns"]
        for typed in turn["user"].split()
        for word in (typed, typed.lower(), typed.strip(".,!?:;").lower())
    }
    assert len(words) > 3000
    assert {word for word in words if word in names} == words & listed
    assert {"sanne", "giulia"} <= words & listed  # "ik ben Sanne", "mi chiamo Giulia"


def test_odd_words_are_no_names() -> None:
    names = Names(["anna", "émile", "zoë"])
    assert "émile" in names and "zoë" in names and "anna" in names
    for word in ["", "ann", "annaa", "Anna", "anna\0", "\0", "\ud800", "z" * 40, None, b"anna"]:
        assert word not in names, repr(word)
    assert "anna" not in Names([])
