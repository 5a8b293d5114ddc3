"""symspellpy's index of deletes held in three NumPy arrays instead of a dict of lists.

symspellpy finds a typo's nearest words through an index from each "delete" (a word's
first five letters with up to two of them removed) to the words that give it: for the
frequency dictionary of 82,765 words, 93,511 deletes and 1.24 million entries. Held as
symspellpy holds it, a dict of Python lists of strings, that is about 25 MB of the
process's memory, most of it the lists (docs/performance.md, "Memory").
:class:`Deletes` holds the same index as the deletes' 64-bit string hashes (sorted), where
each one's words start, and the words' positions in the dictionary: about 6 MB. It answers
the two questions symspellpy's ``lookup`` asks of its index (``delete in index``,
``index[delete]``) with the same words in the same order, so a lookup finds exactly what it
found before.

A hash alone could match a string that is not a delete, so a found hash is confirmed by
deriving the deletes of the first word filed under it (symspellpy's own ``_edits_prefix``):
when the asked string is among them it is a delete of the index, and since no two of the
index's deletes share a hash (checked when it is built), it is the one filed there.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from symspellpy import SymSpell


class Deletes:
    """The delete -> words index of ``speller`` (its words loaded), compact: what symspellpy
    asks of its index (``in``, ``[]``, ``len``) and nothing more."""

    def __init__(self, speller: SymSpell) -> None:
        self._speller = speller
        self._words = tuple(speller.words)  # the dictionary's order, as symspellpy files them
        numbers: dict[str, int] = {}  # each delete's number, while building only
        groups = array("i")  # entry -> its delete's number
        owners = array("i")  # entry -> its word's position
        edits = speller._edits_prefix  # symspellpy's own deletes of a word
        for position, word in enumerate(self._words):
            for delete in edits(word):
                groups.append(numbers.setdefault(delete, len(numbers)))
                owners.append(position)
        hashes = np.fromiter((hash(delete) for delete in numbers), np.int64, len(numbers))
        del numbers
        order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[order]
        if len(self._hashes) > 1 and not np.all(self._hashes[1:] != self._hashes[:-1]):
            raise ValueError("two deletes of the spelling dictionary share a hash")
        rank = np.empty_like(order, dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        entries = rank[np.frombuffer(groups, dtype=np.int32)]
        # a stable sort keeps each delete's words in the dictionary's order
        self._owners = np.frombuffer(owners, dtype=np.int32)[np.argsort(entries, kind="stable")]
        self._starts = np.zeros(len(order) + 1, dtype=np.int32)
        np.cumsum(np.bincount(entries, minlength=len(order)), out=self._starts[1:])
        self._last: tuple[str, int] = ("", self._find(""))

    def _find(self, delete: str) -> int:
        """The position of ``delete`` among the sorted hashes, or -1."""
        key = hash(delete)
        at = int(np.searchsorted(self._hashes, key))
        if at == len(self._hashes) or self._hashes[at] != key:
            return -1
        first = self._words[self._owners[self._starts[at]]]
        if delete not in self._speller._edits_prefix(first):
            return -1  # another string with a delete's hash
        return at

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
        words = self._words
        return [words[i] for i in self._owners[self._starts[at] : self._starts[at + 1]].tolist()]

    def __len__(self) -> int:
        return len(self._hashes)


def compact(speller: SymSpell, load: Callable[[], bool]) -> bool:
    """Run ``load`` (one of ``speller``'s ``load_dictionary`` calls) keeping only the words
    and their counts, then give ``speller`` the compact index of their deletes; ``load``'s
    answer. The index is built after the words so that its passing strings take pages of
    their own, which are given back once it is built."""
    speller._edits_prefix = _no_deletes
    try:
        loaded = load()
    finally:
        del speller._edits_prefix  # the class's own again
    speller._deletes = Deletes(speller)
    return loaded


def _no_deletes(key: str) -> set[str]:
    """No deletes filed while the words load (:func:`compact` files them afterwards)."""
    return set()
