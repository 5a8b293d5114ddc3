"""Small talk retrieved from an open dialog corpus: the English part of ``chatterbot-corpus``.

The corpus (a package on PyPI, BSD-licensed) holds a few thousand short exchanges in YAML,
one file per topic: greetings, jokes, food, books, films, sports, science, the bot's own
profile, feelings... As ChatterBot itself trains on it, each line of a conversation is an
answer to the line before it; the same statement with several answers ("Tell me a joke",
or a question followed by alternative replies) becomes one entry with all of them, and the
skill varies among them.

Retrieval scores each statement by wording and by meaning. Wording is TF-IDF over character
n-grams (:mod:`shared.tfidf`, as scikit-learn fits it), as in the FAQ skill, scored twice:
on the whole utterance and on its content words only (English stop words removed), combined
by their geometric mean. The content score keeps "How old are you?" from matching "How are
you?" (they share every word but "old"); the whole-text score keeps word order and the small
words that make "Are you a robot?" a question about the bot. An utterance made only of stop
words ("How are you?") is matched against statements made only of stop words. Meaning is the
cosine of sentence embeddings (:mod:`shared.meaning`), and the score is the geometric mean
of wording and meaning, so a statement must say the same thing in similar words: "What do
you think about cats?" no longer finds "do you think hal" (wording 0.62, meaning 0.20), nor
"I have a dog named Max" a line about namespaces. Below :data:`THRESHOLD` the corpus has
nothing to say, and the skill leaves the turn to others rather than answer about something
else.

A statement must also speak of the same person as the utterance (:func:`spoken_of`):
"I'm bored" is close in words and meaning to "Are you bored?", whose answer ("Bots like
myself are not able to feel boredom") tells the user of the bot's feelings when they spoke
of their own. Such a statement is passed over for the closest one that agrees.
"""

from __future__ import annotations

import functools
import importlib.resources
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import yaml

from shared import meaning
from shared.tfidf import ENGLISH_STOP_WORDS, Tfidf

#: The corpus files used (chatterbot_corpus/data/english/<name>.yml). Left out: tech_support
#: (a thousand lines of one help-desk script), trivia and coding (quiz answers, not talk),
#: history and politics (dated opinions stated as facts).
CATEGORIES: tuple[str, ...] = (
    "greetings",
    "conversations",
    "humor",
    "botprofile",
    "emotion",
    "psychology",
    "ai",
    "food",
    "literature",
    "movies",
    "sports",
    "science",
    "health",
    "money",
    "computers",
    "gossip",
)
#: Lowest score (wording and meaning combined) that still answers, chosen on the scripted
#: first conversation of tests/e2e/test_first_conversation.py and the ordinary questions of
#: tests/e2e/test_small_talk.py: true matches there score 0.72 and up ("Thank you, that was
#: fun" 0.72, "Are you happy?" 0.83, "Tell me another joke" 0.89), the wrong ones below
#: ("my favourite color is blue" 0.66 -> "Blue", "Do you like to travel?" 0.49 -> "What do
#: you like to do?", "What's the weather like in Paris?" 0.39 -> "What's up?").
THRESHOLD = 0.67
#: How many texts' searches :meth:`CorpusIndex.best` keeps.
BEST_KEPT = 1024

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
#: Words for the one spoken to, and for the speaker, as chat types them ("me" left out:
#: "tell me a joke" asks of the one spoken to).
_ADDRESSEE = frozenset({"you", "your", "yours", "yourself", "you're", "youre", "you've", "u", "ur"})
_SPEAKER = frozenset({"i", "i'm", "im", "i've", "ive", "i'd", "my", "mine", "myself"})

Person = Literal["speaker", "addressee"]


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def whole_text(text: str) -> str:
    return " ".join(words(text))


def spoken_of(text: str) -> Person | None:
    """Whom ``text`` speaks of, when it is one of the two only: the speaker ("I'm bored")
    or the one spoken to ("Are you bored?"); None for both ("I like you") or neither."""
    said = set(words(text))
    speaker, addressee = bool(said & _SPEAKER), bool(said & _ADDRESSEE)
    if speaker == addressee:
        return None
    return "speaker" if speaker else "addressee"


def content_words(text: str) -> str:
    return " ".join(w for w in words(text) if w not in ENGLISH_STOP_WORDS)


def clean(line: object) -> str:
    """YAML folds long lines and keeps double spaces; numbers come as ints."""
    return " ".join(str(line).split())


@dataclass
class Entry:
    """One statement of the corpus and every answer it has there."""

    statement: str
    category: str
    answers: list[str] = field(default_factory=list)


def corpus_files(categories: Iterable[str]) -> list[tuple[str, str]]:
    """(category, YAML text) of each named file of the installed corpus."""
    root = importlib.resources.files("chatterbot_corpus") / "data" / "english"
    return [(name, (root / f"{name}.yml").read_text(encoding="utf-8")) for name in categories]


def load_entries(files: Iterable[tuple[str, str]]) -> list[Entry]:
    """Every (statement, answers) of the files, statements merged case- and
    punctuation-blind."""
    entries: dict[str, Entry] = {}
    for category, text in files:
        document = yaml.safe_load(text) or {}
        for conversation in document.get("conversations") or []:
            lines = [clean(line) for line in conversation if clean(line)]
            for statement, reply in itertools.pairwise(lines):
                key = whole_text(statement)
                if not key:
                    continue
                entry = entries.setdefault(key, Entry(statement, category))
                if reply not in entry.answers:
                    entry.answers.append(reply)
    if not entries:
        raise ValueError("the corpus holds no conversation")
    return list(entries.values())


class _Tfidf:
    """One TF-IDF view of the statements, fitted once (:mod:`shared.tfidf`, as
    scikit-learn's ``TfidfVectorizer`` fits it).

    A query is weighted here rather than with ``vectorizer.transform``, as in the FAQ
    skill: the same n-grams, sublinear term frequency, IDF and L2 norm, without
    scikit-learn's per-call validation, which costs several times the weighting itself
    (docs/performance.md, "Figures behind the code's choices"). The test checks that both
    give the same similarities.
    """

    def __init__(self, statements: list[str], preprocessor: Callable[[str], str]) -> None:
        tfidf = Tfidf(statements, analyzer="char_wb", ngram_range=(3, 5), preprocessor=preprocessor)
        #: the statements' rows (L2-normalised) as compressed sparse columns
        self.indptr, self.indices, self.data = tfidf.by_column()
        self.statements = len(statements)
        self._analyse = tfidf.analyse
        self._vocabulary: dict[str, int] = tfidf.vocabulary
        self._idf = tfidf.idf

    def similarities(self, text: str) -> np.ndarray:
        """Cosine similarity of ``text`` to every statement (0..1)."""
        counts = Counter(g for g in self._analyse(text) if g in self._vocabulary)
        if not counts:
            return np.zeros(self.statements)
        columns = np.fromiter((self._vocabulary[g] for g in counts), dtype=np.intp)
        weights = (1.0 + np.log(np.fromiter(counts.values(), dtype=float))) * self._idf[columns]
        # matrix[:, columns] @ weights, read straight from the CSC arrays: scipy's column
        # slice costs more than the product (docs/performance.md).
        starts = self.indptr[columns]
        lengths = self.indptr[columns + 1] - starts
        positions = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
        positions += np.arange(positions.size)
        similarities: np.ndarray = np.bincount(
            self.indices[positions],
            weights=self.data[positions] * np.repeat(weights, lengths),
            minlength=self.statements,
        )
        return similarities / float(np.linalg.norm(weights))


class CorpusIndex:
    """The statements as two TF-IDF views (whole text, content words) and their meanings,
    computed once."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        statements = [e.statement for e in entries]
        self.whole = _Tfidf(statements, whole_text)
        self.content = _Tfidf(statements, content_words)
        self._stop_words_only = np.array([not content_words(s) for s in statements])
        persons = [spoken_of(s) for s in statements]
        self._of_speaker = np.array([p == "speaker" for p in persons])
        self._of_addressee = np.array([p == "addressee" for p in persons])
        self._meanings = meaning.embed(statements)
        self._kept = functools.lru_cache(maxsize=BEST_KEPT)(self._search)

    def wording(self, text: str) -> np.ndarray:
        """How close each statement's words are to ``text`` (0..1)."""
        whole = self.whole.similarities(text)
        if not content_words(text):
            scores: np.ndarray = whole * self._stop_words_only
            return scores
        scores = np.sqrt(whole * self.content.similarities(text))
        return scores

    def similarities(self, text: str) -> np.ndarray:
        """Wording and meaning together (0..1): both must be close."""
        close_in_meaning = np.clip(meaning.similarities(text, self._meanings), 0.0, 1.0)
        scores: np.ndarray = np.sqrt(np.clip(self.wording(text), 0.0, 1.0) * close_in_meaning)
        return scores

    def best(self, text: str) -> tuple[Entry, float] | None:
        """The closest statement and its similarity, or None below :data:`THRESHOLD`.

        Kept by ``text`` for the last :data:`BEST_KEPT` texts: the search (two TF-IDF
        weighings and the meanings' product) was most of the skill's CPU on a turn it
        answers, and chat repeats itself ("hi", "how are you?")."""
        return self._kept(text)

    def _search(self, text: str) -> tuple[Entry, float] | None:
        """:meth:`best`, searched."""
        if not whole_text(text):
            return None
        similarities = self.similarities(text)
        person = spoken_of(text)
        if person is not None:
            # a statement about the other person answers another question
            other = self._of_addressee if person == "speaker" else self._of_speaker
            similarities = np.where(other, 0.0, similarities)
        index = int(similarities.argmax())
        similarity = float(similarities[index])
        return (self.entries[index], similarity) if similarity >= THRESHOLD else None


def build_index(categories: Iterable[str] = CATEGORIES) -> CorpusIndex:
    return CorpusIndex(load_entries(corpus_files(categories)))
