"""TF-IDF fitted as scikit-learn's ``TfidfVectorizer`` fits it, without scikit-learn.

The intents annotator and the FAQ and small-talk skills weigh a short utterance against a
few hundred or thousand fixed lines by TF-IDF cosine. They used to fit scikit-learn's
vectorizer at import, and importing ``sklearn.feature_extraction.text`` loads scikit-learn
and SciPy: 750 modules and about 90 MB of the agent's resident memory when the services run
in its process, for a fit that is a count, a sort and a logarithm (docs/performance.md,
"Half the CPU"). This module does the same arithmetic with numpy, for the settings those
services use: ``analyzer`` ``"word"`` (``token_pattern``, word n-grams) or ``"char_wb"``
(character n-grams inside words, padded with a space), ``sublinear_tf``, the smoothed IDF
``ln((1 + n) / (1 + df)) + 1``, rows normalised to unit length, the vocabulary sorted as
scikit-learn sorts it, and the preprocessor as it applies it (lower case unless one is
given). The services' tests check each figure against scikit-learn's own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Literal

import numpy as np

#: scikit-learn's ``ENGLISH_STOP_WORDS`` (318 words), kept as a file so that reading them
#: does not import scikit-learn; a test checks they are still the same.
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    (Path(__file__).parent / "english_stop_words.txt").read_text().split()
)

_WHITE_SPACES = re.compile(r"\s\s+")


def _word_ngrams(pattern: re.Pattern[str], low: int, high: int, text: str) -> list[str]:
    tokens = pattern.findall(text)
    grams = list(tokens) if low == 1 else []
    for n in range(max(low, 2), min(high, len(tokens)) + 1):
        grams += [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return grams


def _char_wb_ngrams(low: int, high: int, text: str) -> list[str]:
    grams: list[str] = []
    for word in _WHITE_SPACES.sub(" ", text).split():
        padded = f" {word} "
        for n in range(low, high + 1):
            grams += [padded[i : i + n] for i in range(max(len(padded) - n, 0) + 1)]
            if len(padded) <= n:  # a short word counts once, at its smallest n
                break
    return grams


class Tfidf:
    """Fitted on ``texts``: the analyser, the vocabulary (feature -> column), the IDF and the
    texts' rows (unit length, sublinear term frequency), dense or as compressed columns."""

    def __init__(
        self,
        texts: list[str],
        *,
        analyzer: Literal["word", "char_wb"],
        ngram_range: tuple[int, int],
        preprocessor: Callable[[str], str] | None = None,
        token_pattern: str = r"(?u)\b\w\w+\b",
    ) -> None:
        prepare = preprocessor if preprocessor is not None else str.lower
        low, high = ngram_range
        grams = (
            partial(_word_ngrams, re.compile(token_pattern), low, high)
            if analyzer == "word"
            else partial(_char_wb_ngrams, low, high)
        )
        self._grams = grams
        self._prepare = prepare
        counts = [Counter(self.analyse(text)) for text in texts]
        features = sorted({gram for count in counts for gram in count})
        self.vocabulary: dict[str, int] = {gram: column for column, gram in enumerate(features)}
        rows = np.repeat(np.arange(len(texts)), [len(count) for count in counts])
        columns = np.fromiter(
            (self.vocabulary[gram] for count in counts for gram in count), dtype=np.intp
        )
        tf = np.fromiter((n for count in counts for n in count.values()), dtype=np.float64)
        # Each row's entries in column order, as scikit-learn keeps them: its norm sums
        # their squares in this order, and so the same floating-point figure comes out.
        order = np.lexsort((columns, rows))
        rows, columns, tf = rows[order], columns[order], tf[order]
        df = np.bincount(columns, minlength=len(features)).astype(np.float64)
        self.idf: np.ndarray = np.log((1.0 + len(texts)) / (1.0 + df)) + 1.0
        values = (np.log(tf) + 1.0) * self.idf[columns]
        norms = np.sqrt(np.bincount(rows, weights=values * values, minlength=len(texts)))
        values /= np.where(norms > 0, norms, 1.0)[rows]
        self.shape = (len(texts), len(features))
        self._rows, self._columns, self._values = rows, columns, values

    def analyse(self, text: str) -> list[str]:
        """The features of ``text``, repeated as often as they occur."""
        grams: list[str] = self._grams(self._prepare(text))
        return grams

    def dense(self) -> np.ndarray:
        """The texts' rows as one text x feature array."""
        matrix = np.zeros(self.shape)
        matrix[self._rows, self._columns] = self._values
        return matrix

    def by_column(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows as compressed sparse columns: ``(indptr, indices, data)``, column ``j``'s
        row numbers ``indices[indptr[j]:indptr[j + 1]]`` with their values in ``data``."""
        order = np.lexsort((self._rows, self._columns))
        indptr = np.zeros(self.shape[1] + 1, dtype=np.intp)
        np.cumsum(np.bincount(self._columns, minlength=self.shape[1]), out=indptr[1:])
        return indptr, self._rows[order], self._values[order]
