"""The spelling dictionary held compactly (shared.compact_speller): a word is known or not
and a typo finds the same words, counts, distances and order as with symspellpy's own
dict of words and index of deletes."""

import json
import os
import random
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from symspellpy import SymSpell, Verbosity

from shared import spelling
from shared.compact_speller import Deletes, Words, compact

DICTIONARY = str(resources.files("symspellpy") / "frequency_dictionary_en_82_765.txt")
LETTERS = "abcdefghijklmnopqrstuvwxyz"


@pytest.fixture(scope="module")
def stock() -> SymSpell:
    """symspellpy's speller as the package builds it, its index a dict of lists."""
    speller = SymSpell(max_dictionary_edit_distance=2, prefix_length=5)
    speller.load_dictionary(DICTIONARY, term_index=0, count_index=1)
    return speller


def typos(words: list[str], seed: int) -> list[str]:
    """One or two random edits (a letter dropped, added, changed, or two swapped) of each."""
    chance = random.Random(seed)
    typed: list[str] = []
    for word in words:
        for _ in range(chance.choice((1, 2))):
            at = chance.randrange(len(word))
            edit = chance.randrange(4)
            if edit == 0 and len(word) > 1:
                word = word[:at] + word[at + 1 :]
            elif edit == 1:
                word = word[:at] + chance.choice(LETTERS) + word[at:]
            elif edit == 2:
                word = word[:at] + chance.choice(LETTERS) + word[at + 1 :]
            else:
                word = word[:at] + word[at + 1 : at + 2] + word[at : at + 1] + word[at + 2 :]
        typed.append(word)
    return typed


def found(speller: SymSpell, typed: str, verbosity: Verbosity, distance: int) -> list[object]:
    return [
        (item.term, item.distance, item.count)
        for item in speller.lookup(typed, verbosity, max_edit_distance=distance)
    ]


def test_a_typo_finds_the_words_symspellpys_own_index_finds(stock: SymSpell) -> None:
    speller = spelling._speller()
    assert isinstance(speller._deletes, Deletes)
    assert isinstance(speller.words, Words)
    assert speller.words == stock.words
    assert list(speller.words) == list(stock.words)
    for word in ("the", "anxious", "oscar", "anxoius", "", "The", "zzzzqx"):
        assert (word in speller.words) == (word in stock.words)
        assert speller.words.get(word) == stock.words.get(word)
    assert len(speller._deletes) == len(stock._deletes)
    common = [word for word in list(stock.words)[:30000:100] if word.isalpha()]
    asked = [*typos(common, seed=47), "teh", "hwo", "anxoius", "tommorow", "goin", "ab", "x"]
    for typed in asked:
        for distance in (1, 2):
            for verbosity in (Verbosity.CLOSEST, Verbosity.TOP, Verbosity.ALL):
                assert found(speller, typed, verbosity, distance) == found(
                    stock, typed, verbosity, distance
                ), (typed, verbosity, distance)


def test_the_index_answers_only_for_its_deletes(stock: SymSpell) -> None:
    index = spelling._speller()._deletes
    for delete in ("hel", "helo", "hello", "", "ab", "thnks"):
        assert (delete in index) == (delete in stock._deletes)
        if delete in stock._deletes:
            assert index[delete] == stock._deletes[delete]
    for absent in ("qqqqq", "zxzxz", "hellohello", 47):
        assert absent not in index
    with pytest.raises(KeyError):
        index["qqqqq"]


def test_the_index_follows_the_spellers_own_settings(tmp_path: Path) -> None:
    """Another edit distance and prefix length, a dictionary with a word listed twice (its
    counts added) and a line without a count: the same words found as without it."""
    listed = tmp_path / "words.txt"
    listed.write_text("hello 50\nhelp 40\nhelmet 9\nhello 5\nbroken\nshell 7\nyellow 3\n")
    ours = SymSpell(max_dictionary_edit_distance=1, prefix_length=7)
    theirs = SymSpell(max_dictionary_edit_distance=1, prefix_length=7)
    assert compact(ours, lambda: ours.load_dictionary(str(listed), 0, 1))
    assert theirs.load_dictionary(str(listed), 0, 1)
    assert (
        ours.words
        == theirs.words
        == {
            "hello": 55,
            "help": 40,
            "helmet": 9,
            "shell": 7,
            "yellow": 3,
        }
    )
    for typed in ("helo", "hellp", "jello", "helmt", "shel", "yelow", "hlp", "xyz"):
        for verbosity in (Verbosity.CLOSEST, Verbosity.ALL):
            assert found(ours, typed, verbosity, 1) == found(theirs, typed, verbosity, 1)
    assert not compact(ours, lambda: ours.load_dictionary(str(tmp_path / "missing"), 0, 1))


SPELLER_IN_A_PROCESS = """
import json, sys
from pathlib import Path
from symspellpy import SymSpell, Verbosity
from shared.compact_speller import compact

def load_refused():
    raise AssertionError("the saved dictionary was not read")

speller = SymSpell(max_dictionary_edit_distance=2, prefix_length=5)
assert compact(speller, load_refused, Path(sys.argv[1]))
found = {}
for typed in json.loads(sys.argv[2]):
    hits = speller.lookup(typed, Verbosity.ALL, 2)
    found[typed] = [(item.term, item.distance, item.count) for item in hits]
print(json.dumps({"hash": hash("anxious"), "found": found}))
"""


def test_another_process_reads_the_saved_dictionary_and_finds_the_same_words(
    stock: SymSpell, tmp_path: Path
) -> None:
    """Python's string hashes differ from one process to the next: the file a first process
    saved lets each later one skip the build and still find every typo's words."""
    saved = tmp_path / "spelling.npz"
    first = SymSpell(max_dictionary_edit_distance=2, prefix_length=5)
    assert compact(first, lambda: first.load_dictionary(DICTIONARY, 0, 1), saved)
    assert saved.is_file()
    common = [word for word in list(stock.words)[:20000:400] if word.isalpha()]
    asked = [*typos(common, seed=7), "teh", "anxoius", "tommorow", "ab", ""]
    answers = []
    for seed in ("1", "2"):
        run = subprocess.run(
            [sys.executable, "-c", SPELLER_IN_A_PROCESS, str(saved), json.dumps(asked)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        )
        answers.append(json.loads(run.stdout))
    assert answers[0]["hash"] != answers[1]["hash"]
    expected = {
        typed: json.loads(json.dumps(found(stock, typed, Verbosity.ALL, 2))) for typed in asked
    }
    assert answers[0]["found"] == answers[1]["found"] == expected


def test_a_damaged_or_foreign_saved_file_is_built_again(tmp_path: Path) -> None:
    """A file cut short, or saved for other settings, is not read: the dictionary is built
    from the package's text and the file written anew."""
    listed = tmp_path / "words.txt"
    listed.write_text("hello 50\nhelp 40\nhelmet 9\nshell 7\n")
    saved = tmp_path / "saved.npz"
    loads: list[int] = []

    def speller_loaded(distance: int) -> SymSpell:
        speller = SymSpell(max_dictionary_edit_distance=distance, prefix_length=7)

        def load() -> bool:
            loads.append(distance)
            return bool(speller.load_dictionary(str(listed), 0, 1))

        assert compact(speller, load, saved)
        return speller

    speller_loaded(1)
    speller_loaded(1)
    assert loads == [1]  # the second read the file
    assert found(speller_loaded(2), "hlp", Verbosity.ALL, 2) == [("help", 1, 40)]
    assert loads == [1, 2]  # saved for distance 1: built again
    saved.write_bytes(saved.read_bytes()[:100])
    assert found(speller_loaded(2), "helmt", Verbosity.CLOSEST, 2) == [("helmet", 1, 9)]
    assert loads == [1, 2, 2]
    speller_loaded(2)
    assert loads == [1, 2, 2]  # the damaged file was replaced


def test_a_cache_folder_that_cannot_be_made_leaves_the_speller_as_built(tmp_path: Path) -> None:
    """No cache where it cannot be written (a file stands where its folder would): the
    dictionary is built and corrects as always, and nothing is left behind."""
    listed = tmp_path / "words.txt"
    listed.write_text("hello 50\nhelp 40\nhelmet 9\n")
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    speller = SymSpell(max_dictionary_edit_distance=1, prefix_length=7)

    assert compact(speller, lambda: speller.load_dictionary(str(listed), 0, 1), blocker / "x.npz")
    assert found(speller, "helmt", Verbosity.CLOSEST, 1) == [("helmet", 1, 9)]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cache", "words.txt"]
