"""Careless chat typing read as the careful spelling, once, for every service that matches it.

People type "im", "whats ur name", "thx" and "anxoius". The intents annotator's patterns
and examples, the skills' patterns and the retrieval index were written the careful way,
so they miss those turns and the LLM is asked instead (docs/performance.md, "Routing").
:func:`normalise` rewrites such words, one word at a time, with data shipped by two
packages rather than hand lists:

* **contractions without their apostrophe** ("im", "dont", "whats", "youre") from the
  ``contractions`` package's table, back to the apostrophe form ("i'm", "don't").
  Forms the package itself calls unsafe ("its", "were", "well", "ill") are left alone, and
  so is any other form that is an English word of its own ("shed", "shell", "hell"),
  unless the contraction ends in "n't" or "'s" ("cant", "wont", "whats", "lets"), whose
  bare forms are rare as words in chat;
* **chat abbreviations** the same package ships ("u", "thx", "idk", "tmrw"), when the
  abbreviation is not itself an English word ("howdy", "gonna" and "tho" stay as typed);
  "ur" is "your" or "you are" by the word after it (:data:`TWO_READINGS`);
* **misspelt words** ("anxoius", "waht", "thnaks"), by ``symspellpy`` and the frequency
  dictionary its wheel ships (82,765 words, from Google Books n-grams): the most frequent
  word within one edit (two for words of eight letters or more; a swap of two letters is one
  edit, and preferred). When two words are about as near and as frequent ("goin": "join"
  or "going"?) the word is left as typed; so are laughter ("hahaha") and held letters
  that do not squeeze to a word.

A word is corrected only when the dictionary does not know it. Names are kept as typed:
a word with a capital letter is never corrected ("Oskar" stays Oskar) unless the capital
only starts a sentence ("Colud you"; this reading is never echoed back), nor is a word
shorter than four letters ("pls" stays pls) unless two of its letters were swapped ("teh").
Lowercase names the dictionary does not know can be corrected ("oskar" reads "oscar"), so
a skill that takes words from the utterance to echo them back (the greeting skill's name)
reads :func:`unabbreviate`'s text, which has the contractions and abbreviations rewritten
but every other word as typed.

The dictionaries are loaded once per process (:func:`warm`, at a service's start-up), its
words and index of deletes held compactly (:mod:`shared.compact_speller`).
A normalised text is cached: the intents annotator and the skills that run in one
process read the same utterance once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Callable
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from symspellpy import SymSpell
    from symspellpy.suggest_item import SuggestItem

#: The words :func:`normalise` rewrites: letters, with an inner apostrophe at most.
_WORD = re.compile(r"(?<!\w)[A-Za-z]+(?:['\u2019][A-Za-z]+)*(?!\w)")
#: What comes before a sentence's first word: nothing, or a stop and space.
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)\W*$")
#: The next word after one, for :data:`TWO_READINGS`.
_NEXT = re.compile(r"\W*([A-Za-z]+)")
#: Shorter words are kept as typed: at one or two edits a three-letter token is within
#: reach of dozens of words ("pls" is one edit from "plus"), and short unknown tokens are
#: as often names or chat forms as typos.
SHORTEST_CORRECTED = 4
#: Three-letter words are corrected only when two of their letters were swapped ("teh"),
#: which keeps their letters ("hwo", "who" or "how", is too close to call and stays).
SHORTEST_SWAPPED = 3
#: Words this long or longer may be two edits from the dictionary's word ("tommorow");
#: shorter ones are one edit from it at most, since two edits reach too far for a short
#: word ("sqlite" is two from "site").
TWO_EDITS_FROM = 8
#: Of two words equally near a typo, the dictionary's guess is taken only when it is this
#: many times as frequent as the next ("hapy" is "happy", 11 times "hay"; "goin" is "join"
#: or "going", nearly as frequent, and stays as typed).
CLEAR_LEAD = 10
#: The contractions the ``contractions`` package itself calls unsafe to expand, since their
#: bare forms are words ("its", "were", "well", "ill"): its ``safety_keys``, copied so that
#: the package need not be imported (a test checks the copy against it).
UNSAFE = frozenset(
    ["he's", "he'll", "we'll", "we'd", "it's", "i'd", "we're", "i'll", "who're", "o'"]
)
_DICTIONARY = "frequency_dictionary_en_82_765.txt"
_BIGRAMS = "frequency_bigramdictionary_en_243_342.txt"
#: The one chat form read two ways: the package has "ur" as "you are", but "whats ur
#: name" is "your". The word after it decides, by the two-word frequencies symspellpy's
#: wheel also ships ("your name" 591 million, "are name" none; "are funny" 13 million,
#: "your funny" none); with no next word, or neither pair known, the first reading.
TWO_READINGS = {"ur": ("your", "you are")}
#: Laughter and other repeated syllables ("haha", "lolol"): not typos of "hama" or "yamaha".
_REPEATED = re.compile(r"([a-z]{1,2})\1+[a-z]?$")
#: A letter held down three times or more.
_STRETCHED = re.compile(r"([a-z])\1{2,}")


@cache
def _speller() -> SymSpell:
    """The wheel's frequency dictionary, loaded once per process."""
    from symspellpy import SymSpell

    from shared.compact_speller import compact

    speller = SymSpell(max_dictionary_edit_distance=2, prefix_length=5)
    path = Path(str(resources.files("symspellpy") / _DICTIONARY))
    if not path.is_file():
        raise FileNotFoundError(f"symspellpy's {_DICTIONARY} is missing from its package")
    # the same words and index of deletes in a third of the memory, built once per machine
    # and read from a file by every process after (shared/compact_speller.py)
    if not compact(speller, lambda: speller.load_dictionary(str(path), 0, 1), _saved(path)):
        raise FileNotFoundError(f"symspellpy's {_DICTIONARY} could not be read")
    return speller


def _saved(dictionary: Path) -> Path:
    """Where the built dictionary is kept for the next process: the user's cache folder
    (``XDG_CACHE_HOME``, else ``~/.cache``), named by the dictionary file's size and time,
    so a new version of the package builds it again."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    found = dictionary.stat()
    return root / "chorus" / "spelling" / f"symspellpy-{found.st_size}-{found.st_mtime_ns}.npz"


def _package_table(name: str) -> dict[str, str]:
    """One of the ``contractions`` package's JSON tables, as it ships it, read from the
    package's folder without importing the package: its module widens the tables at import
    with forms we do not want and builds search automata we do not use (it, textsearch and
    two C extensions: about 1 MB of the served agent's memory; docs/performance.md,
    "The served agent's memory")."""
    found = importlib.util.find_spec("contractions")
    folders = found.submodule_search_locations if found is not None else None
    path = Path(next(iter(folders or ["."]))) / "data" / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"contractions' data/{name}.json is missing from its package")
    table: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
    return table


@cache
def _pairs() -> dict[str, int]:
    """How often each reading's last word comes before a word: "your name", "are funny"."""
    lasts = tuple(f"{reading.split()[-1]} " for pair in TWO_READINGS.values() for reading in pair)
    path = resources.files("symspellpy") / _BIGRAMS
    counts: dict[str, int] = {}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith(lasts):
                first, second, count = line.split()
                counts[f"{first} {second}"] = int(count)
    return counts


def _reading(typed: str, after: str) -> str:
    """Of :data:`TWO_READINGS`' two for ``typed``, the one that goes with the next word."""
    readings = TWO_READINGS[typed]
    found = _NEXT.match(after)
    if found is None:
        return readings[0]
    following = found.group(1).lower()
    counts = _pairs()
    return max(readings, key=lambda r: counts.get(f"{r.split()[-1]} {following}", 0))


@cache
def _rewrites() -> dict[str, str]:
    """Bare contraction or chat abbreviation (lowercase) -> the careful spelling."""
    known = _speller().words
    rewrites: dict[str, str] = {}
    for contraction in _package_table("contractions_dict"):
        form = contraction.lower().replace("\u2019", "'")
        if form.count("'") != 1 or form.startswith("'") or form in UNSAFE:
            continue
        bare = form.replace("'", "")
        if bare in known and not form.endswith(("n't", "'s")):
            continue  # "shed", "shell", "hell": a word of its own
        rewrites.setdefault(bare, form)
    for abbreviation, meaning in _package_table("slang_dict").items():
        key = abbreviation.strip().lower()
        if key.isalnum() and key not in known and key not in rewrites:
            rewrites[key] = meaning.strip()
    return rewrites


@lru_cache(maxsize=4096)
def _corrected(word: str) -> str:
    """``word`` as the dictionary spells it, or as typed when it is known, short, has a
    capital letter, or the dictionary's guess is not clear."""
    if len(word) < SHORTEST_SWAPPED or not word.islower() or _REPEATED.match(word):
        return word
    speller = _speller()
    if word in speller.words:
        return word
    if _STRETCHED.search(word):  # "sooo", "pleeease": a letter held, not a typo
        for squeezed in (_STRETCHED.sub(r"\1\1", word), _STRETCHED.sub(r"\1", word)):
            if squeezed in speller.words:
                return squeezed
        return word
    from symspellpy import Verbosity

    distance = 2 if len(word) >= TWO_EDITS_FROM else 1
    found = speller.lookup(word, Verbosity.CLOSEST, max_edit_distance=distance)
    swapped = [item for item in found if sorted(item.term) == sorted(word)]
    if swapped:  # two letters typed in the wrong order: "teh", "waht", "thnaks", "movei"
        return _clear(word, swapped)  # "hwo": "who" or "how"? Left as typed.
    if len(word) < SHORTEST_CORRECTED:
        return word
    return _clear(word, found)  # "goin": "join" or "going"? "helo": "help" or "hello"?


def _clear(word: str, found: list[SuggestItem]) -> str:
    """The nearest word, when it is the only one or :data:`CLEAR_LEAD` times as frequent as
    the next; else ``word`` as typed."""
    if len(found) == 1 or (found and found[0].count >= CLEAR_LEAD * found[1].count):
        return str(found[0].term)
    return word


def _unabbreviated(typed: str, after: str) -> str | None:
    """The careful spelling of a contraction or abbreviation, or None. Capitalised forms
    are names ("Ur", "Ima") except "Im" and "Ive", the sentence-initial "I'm" and "I've"."""
    if "'" in typed or "\u2019" in typed:
        return typed.replace("\u2019", "'")
    if typed in TWO_READINGS:
        return _reading(typed, after)
    if typed.islower() or typed.lower() in ("im", "ive"):
        return _rewrites().get(typed.lower())
    return None


def _word(match: re.Match[str], keep: Callable[[str], bool] | None = None) -> str:
    typed = match.group()
    found = _unabbreviated(typed, match.string[match.end() :])
    if found is not None:
        return found
    if (
        typed[0].isupper()
        and typed[1:].islower()
        and _SENTENCE_START.search(match.string[: match.start()])
    ):
        # a capital that only starts a sentence: "Colud you ..." is a typo, not a name
        corrected = _corrected(typed.lower())
        read = typed if corrected == typed.lower() else corrected.capitalize()
    else:
        read = _corrected(typed)
    # the caller's words asked about only when the reading would change one
    return typed if read != typed and keep is not None and keep(typed) else read


def _abbreviation(match: re.Match[str]) -> str:
    typed = match.group()
    return _unabbreviated(typed, match.string[match.end() :]) or typed


def normalise(text: str, keep: Callable[[str], bool] | None = None) -> str:
    """``text`` with careless chat spelling rewritten word by word; everything between the
    words (spaces, punctuation, emoji) and every known word is kept as typed.

    ``keep`` names more words to keep: a knowledge base's own terms, which the English
    dictionary does not know ("uvicorn", "failover" and "tiering" would read "unicorn",
    "allover" and "tiring"); a contraction or chat abbreviation is rewritten all the same.
    What it keeps may change (an index reloaded), so a reading with it is not cached.

    >>> normalise("hey im oskar, whats ur fav colour? thx")
    "hey i'm oscar, what's your fav colour? thanks"
    """
    if keep is None:
        return _normalised(text)
    return _WORD.sub(lambda match: _word(match, keep), text)


@lru_cache(maxsize=1024)
def _normalised(text: str) -> str:
    return _WORD.sub(_word, text)


@lru_cache(maxsize=1024)
def unabbreviate(text: str) -> str:
    """Only the contractions and chat abbreviations of :func:`normalise` rewritten; every
    other word as typed, so a name read from this text is the name the user typed.

    >>> unabbreviate("hey im oskar")
    "hey i'm oskar"
    """
    return _WORD.sub(_abbreviation, text)


def warm() -> None:
    """Load the dictionary now (a service calls it at start-up, not on its first turn)."""
    normalise("warm")
    _rewrites()
    _pairs()


def is_english(word: str) -> bool:
    """Whether ``word`` (any case) is one of the English dictionary's 82,765 words, the one
    the speller corrects by: "gracias", "tschüss" and "asante" are not."""
    return word.lower() in _speller().words


#: Words counted as neither English nor not: the bot's own name said to it.
NOT_FOREIGN = frozenset({"chorus"})
#: A word of any language with its apostrophes ("didn't", "t'es"): a contraction is read
#: whole.
WORD_OF_ANY_LANGUAGE = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")


def words_of(text: str) -> list[str]:
    """The words of ``text`` in any language, as typed (:data:`WORD_OF_ANY_LANGUAGE`), its
    curly apostrophes made straight and chat abbreviations written out
    (:func:`unabbreviate`: "im" is "i'm")."""
    return WORD_OF_ANY_LANGUAGE.findall(unabbreviate(text.replace("\u2019", "'")))


def mostly_english(text: str) -> bool:
    """Whether at least half the words of ``text`` are in the English dictionary. English
    patterns read English only: "me siento un poco sola aquí" is no statement about "me",
    and "do widzenia" (Polish for goodbye) no question opened by "do"; a remark wholly in
    another language is the LLM's to read, or a nod's."""
    words = [w.lower() for w in words_of(text)]
    words = [w for w in words if w not in NOT_FOREIGN]
    unknown = sum(not is_english(word) and not is_english(word.split("'")[0]) for word in words)
    return 2 * unknown < len(words) or not words
