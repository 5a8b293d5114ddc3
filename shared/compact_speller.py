"""symspellpy's dictionary and its index of deletes held in NumPy arrays instead of dicts.

symspellpy keeps its dictionary as a dict of word -> count (82,765 words: the words, the
dict and each count an object of its own, about 8 MB) and finds a typo's nearest words
through an index from each "delete" (a word's first five letters with up to two of them
removed) to the words that give it: 93,511 deletes and 1.24 million entries, a dict of
Python lists of strings, about 25 MB. In the served agent, which loads it once for every
in-process service, that was the largest part of the spelling reading's memory
(docs/performance.md, "The served agent's memory").

:class:`Words` holds the dictionary as one string of every word, where each starts, its
count, and the words' 64-bit string hashes (sorted): about 2.5 MB. :class:`Deletes` holds
the index as the deletes' hashes (sorted), where each one's words start, and the words'
positions in the dictionary: about 6 MB. Both answer what symspellpy's ``lookup`` and
:mod:`shared.spelling` ask (``word in words``, ``words[word]``, ``delete in index``,
``index[delete]``) with the same counts and the same words in the same order, so a lookup
finds exactly what it found before; a lookup of a typo takes about 1.5 times as long
(0.7-1.0 against 0.4-0.6 ms here).

A hash can be shared, so a word found by its hash is compared with the asked one; a delete
found by its hash is confirmed against the first word filed under it: when the asked string
is one of that word's deletes it is a delete of the index, and since no two of the index's
deletes share a hash (checked when it is built), it is the one filed there.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
from array import array
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from symspellpy import SymSpell


class Words(Mapping[str, int]):
    """symspellpy's word -> count dictionary, compact, in the order it was loaded."""

    def __init__(self, lines: str, counts: np.ndarray) -> None:
        """``lines``: every word, one a line, in the dictionary's order; ``counts`` theirs."""
        # the words' strings made and dropped before any object kept is made, so that none
        # is placed among them and keeps their memory taken
        listed = lines.split("\n") if len(counts) else []
        if len(listed) != len(counts):
            raise ValueError(f"{len(listed)} words for {len(counts)} counts")
        lengths = np.fromiter(map(len, listed), np.int32, len(listed))
        hashes = np.fromiter(map(hash, listed), np.int64, len(listed))
        self._text = "".join(listed)
        del listed
        self._starts = np.zeros(len(lengths) + 1, dtype=np.int32)
        np.cumsum(lengths, out=self._starts[1:])
        self._counts = counts
        order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[order]
        self._order = order.astype(np.int32)

    def word(self, position: int) -> str:
        """The word at ``position`` in the dictionary's order."""
        return self._text[self._starts[position] : self._starts[position + 1]]

    def words(self, positions: np.ndarray) -> list[str]:
        """The words at ``positions``, in that order."""
        text = self._text
        starts = self._starts[positions].tolist()
        ends = self._starts[positions + 1].tolist()
        return [text[start:end] for start, end in zip(starts, ends, strict=True)]

    def _position(self, word: str) -> int:
        key = hash(word)
        at = int(np.searchsorted(self._hashes, key))
        while at < len(self._hashes) and self._hashes[at] == key:
            position = int(self._order[at])
            if self.word(position) == word:
                return position
            at += 1  # another word with the same hash
        return -1

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self._position(word) >= 0

    def __getitem__(self, word: str) -> int:
        position = self._position(word)
        if position < 0:
            raise KeyError(word)
        return int(self._counts[position])

    def __len__(self) -> int:
        return len(self._counts)

    def __iter__(self) -> Iterator[str]:
        return map(self.word, range(len(self._counts)))


class Deletes:
    """The delete -> words index of ``speller`` (its words loaded), compact: what symspellpy
    asks of its index (``in``, ``[]``, ``len``) and nothing more."""

    def __init__(self, speller: SymSpell, words: Words, layout: Layout) -> None:
        self._speller = speller
        self._words = words  # the dictionary's order, as symspellpy files them
        # the deletes' strings made and dropped within this one call, so that no object
        # kept after is placed among them and keeps their memory taken
        size = len(layout.starts) - 1
        names = layout.deletes.split("\n") if size else []
        hashes = np.fromiter(map(hash, names), np.int64, size)
        del names
        order = np.argsort(hashes)
        self._hashes = hashes[order]
        if len(self._hashes) > 1 and not np.all(self._hashes[1:] != self._hashes[:-1]):
            raise ValueError("two deletes of the spelling dictionary share a hash")
        # each delete's words, the deletes taken in the order of their hashes
        sizes = np.diff(layout.starts)[order]
        self._starts = np.zeros(len(order) + 1, dtype=np.int32)
        np.cumsum(sizes, out=self._starts[1:])
        shift = np.repeat(layout.starts[:-1][order] - self._starts[:-1], sizes)
        self._owners = layout.owners[np.arange(len(shift), dtype=np.int64) + shift]
        self._last: tuple[str, int] = ("", self._find(""))

    def _find(self, delete: str) -> int:
        """The position of ``delete`` among the sorted hashes, or -1."""
        key = hash(delete)
        at = int(np.searchsorted(self._hashes, key))
        if at == len(self._hashes) or self._hashes[at] != key:
            return -1
        first = self._words.word(self._owners[self._starts[at]])
        if not self._deletes_from(delete, first):
            return -1  # another string with a delete's hash
        return at

    def _deletes_from(self, delete: str, word: str) -> bool:
        """Whether symspellpy files ``word`` under ``delete``: ``delete`` is the word's
        prefix with at most the speller's edit distance of its letters left out, which is
        what ``_edits_prefix`` derives, told without deriving them all."""
        prefix = word[: self._speller._prefix_length]
        if not 0 <= len(prefix) - len(delete) <= self._speller._max_dictionary_edit_distance:
            return False
        letters = iter(prefix)
        return all(letter in letters for letter in delete)

    def __contains__(self, delete: object) -> bool:
        if not isinstance(delete, str):
            return False
        at = self._find(delete)
        # symspellpy asks ``delete in index`` then ``index[delete]``: the second is the
        # first's answer (one tuple, replaced whole, so another thread's ask cannot mix in)
        self._last = (delete, at)
        return at >= 0

    def __getitem__(self, delete: str) -> list[str]:
        last, at = self._last
        if last != delete:
            at = self._find(delete)
        if at < 0:
            raise KeyError(delete)
        return self._words.words(self._owners[self._starts[at] : self._starts[at + 1]])

    def __len__(self) -> int:
        return len(self._hashes)


class Layout(NamedTuple):
    """The index of deletes before any string is hashed: Python's string hashes change
    from one process to the next, so this, not the index, is what a process can take from
    another's work (:func:`compact`'s ``saved`` file)."""

    deletes: str  # every delete, in the order first derived, one per line
    owners: np.ndarray  # the words of delete 0, then of delete 1...: positions in dictionary order
    starts: np.ndarray  # where each delete's words start in owners


def _layout(speller: SymSpell, words: Words) -> Layout:
    """The deletes of ``words``, derived the way symspellpy derives them. A word's deletes
    are its prefix's (symspellpy cuts the word to ``prefix_length`` letters first), and many
    words share a prefix: each prefix's deletes are derived once, and every word's entries
    are its prefix's, laid out with NumPy. It is most of the dictionary's build, which is
    why :func:`compact` keeps its result in a file."""
    numbers: dict[str, int] = {}  # each delete's number
    prefixes: dict[str, int] = {}  # each prefix's number
    prefix_deletes = array("i")  # the prefixes' delete numbers, one prefix after another
    prefix_starts = array("i", [0])
    edits = speller._edits_prefix  # symspellpy's own deletes of a word
    cut = speller._prefix_length
    word_prefix = np.empty(len(words), dtype=np.int32)
    for position, word in enumerate(words):
        prefix = word[:cut]
        number = prefixes.get(prefix)
        if number is None:
            number = prefixes[prefix] = len(prefixes)
            prefix_deletes.extend(
                numbers.setdefault(delete, len(numbers)) for delete in edits(prefix)
            )
            prefix_starts.append(len(prefix_deletes))
        word_prefix[position] = number
    starts = np.frombuffer(prefix_starts, dtype=np.int32)
    sizes = np.diff(starts)[word_prefix]  # each word's number of deletes
    # entry -> its word's position, the words in the dictionary's order
    owners = np.repeat(np.arange(len(words), dtype=np.int32), sizes)
    # entry -> its place among its prefix's deletes, then that delete's number
    within = np.arange(len(owners), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    groups = np.frombuffer(prefix_deletes, dtype=np.int32)
    entries = groups[np.repeat(starts[:-1][word_prefix], sizes) + within]
    # a stable sort keeps each delete's words in the dictionary's order
    by_delete = np.zeros(len(numbers) + 1, dtype=np.int32)
    np.cumsum(np.bincount(entries, minlength=len(numbers)), out=by_delete[1:])
    return Layout("\n".join(numbers), owners[np.argsort(entries, kind="stable")], by_delete)


def compact(speller: SymSpell, load: Callable[[], bool], saved: Path | None = None) -> bool:
    """Run ``load`` (one of ``speller``'s ``load_dictionary`` calls) keeping only the words
    and their counts, then give ``speller`` them and the index of their deletes compact;
    ``load``'s answer. The index is built after the words so that its passing strings take
    pages of their own, which are given back once it is built. Words cannot be added to
    ``speller`` afterwards (its dictionary is read-only).

    With ``saved``, a file another process wrote for the same dictionary and settings is
    read instead of running ``load`` and building the index (every service process that
    reads spelling would build the same; docs/performance.md, "Built once per machine"),
    and the file is written when it is missing or unreadable; a file that cannot be written
    leaves the speller as built."""
    if saved is not None and _restore(speller, saved):
        return True
    speller._edits_prefix = _no_deletes
    try:
        loaded = load()
    finally:
        del speller._edits_prefix  # the class's own again
    counts = speller.words
    lines = "\n".join(counts)
    words = Words(lines, np.fromiter(counts.values(), np.int64, len(counts)))
    speller._words = words
    layout = _layout(speller, words)
    speller._deletes = Deletes(speller, words, layout)
    if loaded and saved is not None:
        _save(saved, speller, lines, words, layout)
    return loaded


#: Bumped when what :func:`_save` writes changes, so an older file is not read.
_FORMAT = 1


def _save(path: Path, speller: SymSpell, lines: str, words: Words, layout: Layout) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed over it), so processes
    starting together may each write it and every reader sees one complete file.
    ``lines``: the words, one a line, as :class:`Words` was made of them."""
    import tempfile  # only the process that builds the dictionary writes it

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return  # no cache here: the next process builds the dictionary too
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(
                out,
                format=np.int64(_FORMAT),
                settings=np.array(
                    [speller._max_dictionary_edit_distance, speller._prefix_length], np.int64
                ),
                max_length=np.int64(speller._max_length),
                sizes=np.array([len(words), len(layout.starts) - 1], np.int64),
                words=np.frombuffer(lines.encode(), dtype=np.uint8),
                counts=words._counts,
                deletes=np.frombuffer(layout.deletes.encode(), dtype=np.uint8),
                owners=layout.owners,
                starts=layout.starts,
            )
        os.chmod(name, 0o644)  # readable by the machine's other users, as a cache is
        os.replace(name, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(name)


def _restore(speller: SymSpell, path: Path) -> bool:
    """Give ``speller`` the words and index saved in ``path``; False, the speller untouched,
    when the file is missing, unreadable, of another format or for other settings."""
    try:
        # the file opened here, so that one numpy cannot read is closed all the same
        with path.open("rb") as file, np.load(file, allow_pickle=False) as data:
            settings = [speller._max_dictionary_edit_distance, speller._prefix_length]
            if int(data["format"]) != _FORMAT or data["settings"].tolist() != settings:
                return False
            sizes = data["sizes"].tolist()
            lines = data["words"].tobytes().decode()
            counts = data["counts"]
            layout = Layout(
                data["deletes"].tobytes().decode(),
                data["owners"],
                data["starts"],
            )
            max_length = int(data["max_length"])
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, UnicodeDecodeError):
        return False
    if len(counts) != sizes[0] or len(layout.starts) != sizes[1] + 1:
        return False
    if sizes[1] and layout.deletes.count("\n") != sizes[1] - 1:
        return False
    if len(layout.owners) != layout.starts[-1] or not np.all(layout.owners < sizes[0]):
        return False
    try:
        words = Words(lines, counts)
    except ValueError:
        return False
    speller._words = words
    speller._deletes = Deletes(speller, words, layout)
    speller._max_length = max_length
    return True


def _no_deletes(key: str) -> set[str]:
    """No deletes filed while the words load (:func:`compact` files them afterwards)."""
    return set()
