"""The knowledge index: passages, their embeddings, and hybrid search over them.

One file holds it all (NumPy's ``.npz``: the passages as JSON, a SHA-256 digest and an
embedding per passage), written to a temporary name and renamed over the old one, so a
reader never sees half a file and a service can swap it in while it serves. Building again
reads the old file first: a passage whose digest is unchanged keeps its embedding, and
only new or edited passages are embedded.

Search is hybrid, each half good where the other is weak:

- **lexical**: BM25 (``bm25s``, sparse matrices, milliseconds at 100,000 passages) over
  stemmed words without stop words (PyStemmer's English Snowball stemmer), which finds
  the rare exact term ("FerretDB", "run_below");
- **dense**: the cosine of WordLlama sentence embeddings (:mod:`shared.meaning`, the model
  the project already ships, 256 dimensions), which finds a paraphrase ("bring back my
  dialogs" for "Restoring");

fused by adding them (BM25 scaled to its best match, :func:`combine`), one passage per
section. The BM25 index is built when the file is loaded (seconds for 100,000 passages),
so the file holds only what is costly to make again: the embeddings.
"""

from __future__ import annotations

import io
import itertools
import json
import logging
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from pydantic import BaseModel, TypeAdapter

from shared.knowledge.passages import MAX_PASSAGES, Passage
from shared.tfidf import ENGLISH_STOP_WORDS

#: Bumped when the file's layout changes; an older file is rebuilt, never misread.
FORMAT = 1
#: The embedding model, recorded in the file: another model's vectors are not comparable.
MODEL = "wordllama-l2_supercat-256"
#: How much the dense cosine counts against the best BM25 match (which scores 1).
DENSE_WEIGHT = 1.0
#: How much a passage gains from its file's share of the best candidates' scores.
SOURCE_WEIGHT = 0.2
#: The candidates that vote for their file (20 against 10: recall@3 +0.008, answers citing a
#: right file 0.862 against 0.848, bench/knowledge.py).
VOTERS = 20
#: How deep each half of a search goes (BM25's best and the dense search's), and a vector
#: engine's lists.
DEPTH = 50
#: From this many passages on, the dense search probes clusters instead of every passage.
CLUSTERED_FROM = 20_000
#: The clusters a dense search reads (of about the square root of the passages).
PROBES = 12
#: How much the words of a follow-up's context count against its own.
CONTEXT_WEIGHT = 0.3
#: Passages embedded per call while building (bounds the memory of one call).
EMBED_BATCH = 256
#: How much a passage that defines the term a question asks about ("What is a tier?")
#: gains, against the best BM25 match's 1, for the places after the first
#: (:meth:`KnowledgeIndex.defining`; 0.3, 0.5, 0.7 and 1.0 were measured on two thirds of
#: the question set, docs/performance.md "Knowledge base").
DEFINITION_WEIGHT = 0.5

_PASSAGES = TypeAdapter(list[Passage])
_WORD = re.compile(r"(?u)\b\w\w+\b")
#: A paragraph that defines a term, as a glossary writes it: "turn: one human utterance
#: and the bot's answer to it", "dream group, dream_group: ...", "view (of a dialog): ...".
_DEFINES = re.compile(r"([a-z][\w'.-]*(?: [\w'.-]+){0,3})(?:,[^:\n]{0,30})?(?: \([^)\n]*\))?: ")
#: A table's row (:mod:`shared.knowledge.passages` writes each cell "header: value;"), which
#: names its first column, not a term.
_TABLE_ROW = re.compile(r"; [\w ]+: ")
#: A question about what something is or means.
_ASKS_WHAT = re.compile(
    r"\b(what(?:'s| is| are| was| does)|meaning|means?|define|definition|difference between|"
    r"stand for)\b",
    re.IGNORECASE,
)


class IndexError_(ValueError):
    """The index file is missing, unreadable or of another format; the message says which."""


@cache
def _threads() -> Any:
    """threadpoolctl's handle on NumPy's BLAS, found once (a few milliseconds)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@cache
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


@cache
def _stopwords() -> frozenset[str]:
    """scikit-learn's English stop words (318, "how" and "what" among them: a question's
    frame says nothing of its subject), with bm25s's own."""
    return frozenset(_bm25s().stopwords.STOPWORDS_EN) | frozenset(ENGLISH_STOP_WORDS)


@cache
def _bm25s() -> ModuleType:
    """bm25s, imported without SciPy unless SciPy is loaded already. The package imports
    ``scipy.sparse`` if it can, only to offer it as one way to build its matrix; the way
    it uses by default, and here, is its own numpy one, so SciPy would be 7 MB of the
    served agent's memory for nothing (docs/performance.md, "Half the CPU"). For the
    import, ``scipy`` reads as absent, then the entry is removed again."""
    if "scipy" in sys.modules:
        import bm25s
    else:
        sys.modules["scipy"] = None  # type: ignore[assignment]
        try:
            import bm25s
        finally:
            if sys.modules.get("scipy", 0) is None:
                del sys.modules["scipy"]
    import bm25s.stopwords

    module: ModuleType = bm25s
    return module


def terms(text: str) -> list[str]:
    """The words BM25 matches: lowercased, stop words out, stemmed ("restoring" → "restor").
    bm25s's own tokenizer pattern; its stemmer call, one word list at a time."""
    stop = _stopwords()
    words = [w for w in _WORD.findall(text.lower()) if w not in stop]
    stemmed: list[str] = _stemmer().stemWords(words)
    return stemmed


def joined(text: str) -> list[str]:
    """Each pair of adjacent words written as one, stemmed: as written ("back up" →
    "backup", "log in" → "login") and with the first word stemmed ("times out" →
    "timeout"), since the docs write joined many words a question splits. Only the pairs
    the index holds count (:meth:`KnowledgeIndex._lexical_scores` drops the rest, so "how
    do" → "howdo" costs nothing), and they count only in BM25, not in the share of the
    question's words a passage or the knowledge base holds."""
    words = _WORD.findall(text.lower())
    stems: list[str] = _stemmer().stemWords(words)
    pairs = [a + b for a, b in itertools.pairwise(words)]
    pairs += [a + b for a, b in zip(stems, words[1:], strict=False)]
    stemmed: list[str] = _stemmer().stemWords(pairs)
    return sorted(set(stemmed))


@dataclass(frozen=True)
class Hit:
    """A passage found, with what the search thought of it."""

    passage: Passage
    score: float  # the fused score (:func:`combine`)
    cosine: float  # its dense similarity to the query (-1..1)
    overlap: float  # the share of the query's terms it contains (0..1)
    known: float  # the share of the query's terms the knowledge base has at all (0..1)
    lexical_rank: int | None  # its place in the BM25 list (0 first), None if not in it
    dense_rank: int | None
    # What the search says of its *file*: whether it is the file with the most of the best
    # candidates' scores (the file bonus's vote) and the file of the dense half's best
    # candidate, and its fused score less the best score of a passage from another file
    # (how far ahead its file is; negative behind another file's). A best passage only a
    # little ahead of a neighbouring page's is where the confident wrong-file answers were
    # (bench/knowledge.py, docs/performance.md "Knowledge base").
    file_voted: bool = True
    dense_file: bool = True
    margin: float = 0.0
    # The share of the query's terms its own text holds, without its file name and headings.
    text_overlap: float = 0.0


@dataclass(frozen=True)
class Fused:
    """One candidate kept by :func:`combine`: its place among the candidates, its fused
    score, and what the search says of its file (:class:`Hit`)."""

    at: int
    score: float
    file_voted: bool
    dense_file: bool
    margin: float


def combine(
    lexical: np.ndarray,
    dense: np.ndarray,
    sources: np.ndarray,
    sections: np.ndarray,
    k: int,
    bonus: np.ndarray | None = None,
) -> list[Fused]:
    """The ``k`` best candidates (one per section), by their fused score. ``sources`` and
    ``sections`` number each candidate's file and section (integer arrays).

    ``lexical`` (BM25, any scale) is divided by its best, so the best match scores 1; the
    dense cosine is added at :data:`DENSE_WEIGHT`, and ``bonus`` when given (a passage
    defining the term asked about, :meth:`KnowledgeIndex.defining`); then each candidate gains
    :data:`SOURCE_WEIGHT` times its file's share of the :data:`VOTERS` best candidates'
    scores, since a question whose answer is in one page usually matches several of its
    passages. Measured on the question set (bench/knowledge.py) against reciprocal rank
    fusion, which gives the weaker half a full vote: recall@3 0.87 against 0.79. Only
    NumPy's vector operations and partial sorts: milliseconds at 100,000 candidates.

    Each kept candidate also says whether its file won the vote and holds the dense half's
    best candidate, and its lead over the best candidate of another file: the confidence's
    signs that the answer is in this file rather than a neighbouring page.
    """
    top = float(lexical.max()) if len(lexical) else 0.0
    scores = (lexical / top if top > 0 else np.zeros_like(lexical)) + DENSE_WEIGHT * dense
    if bonus is not None:
        scores = scores + bonus
    voters = _best(scores, VOTERS)
    votes = np.zeros(int(sources.max()) + 1 if len(sources) else 1)
    np.add.at(votes, sources[voters], scores[voters])
    if votes.max() > 0:
        votes /= votes.max()
    scores = scores + SOURCE_WEIGHT * votes[sources]
    winner = int(np.argmax(votes))
    dense_winner = int(sources[int(np.argmax(dense))]) if len(dense) else -1
    ranked = _best(scores, max(DEPTH, k * 8))
    kept: list[Fused] = []
    seen: set[int] = set()
    for row in ranked:
        section = int(sections[row])
        if section in seen:
            continue
        seen.add(section)
        source = int(sources[row])
        others = ranked[sources[ranked] != source]
        rival = float(scores[others[0]]) if len(others) else 0.0
        kept.append(
            Fused(
                at=int(row),
                score=float(scores[row]),
                file_voted=source == winner,
                dense_file=source == dense_winner,
                margin=float(scores[row]) - rival,
            )
        )
        if len(kept) == k:
            break
    return kept


def _best(scores: np.ndarray, count: int) -> np.ndarray:
    """The rows of the ``count`` highest scores, highest first (a partial sort)."""
    count = min(count, len(scores))
    if count == 0:
        return np.zeros(0, dtype=np.intp)
    top = np.argpartition(-scores, count - 1)[:count]
    ordered: np.ndarray = top[np.argsort(-scores[top])]
    return ordered


def _clusters(embeddings: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """k-means (scikit-learn's mini-batch) over the embeddings: the centres, normalised,
    and each cluster's rows. Made when the index loads, about ten seconds at 100,000."""
    from sklearn.cluster import MiniBatchKMeans

    count = max(PROBES, int(np.sqrt(len(embeddings))))
    kmeans = MiniBatchKMeans(n_clusters=count, n_init=1, random_state=0, batch_size=4096)
    # One thread, as for a search: on a busy machine the second one only waits for a core,
    # and the fit takes more than twice as long (docs/performance.md, "Knowledge base").
    with _threads().limit(limits=1):
        labels = kmeans.fit_predict(embeddings)
    centres = kmeans.cluster_centers_.astype(np.float32)
    centres /= np.maximum(np.linalg.norm(centres, axis=1, keepdims=True), 1e-12)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(count + 1))
    members = [order[bounds[c] : bounds[c + 1]] for c in range(count)]
    return centres, members


@lru_cache(maxsize=4096)
def _paragraphs(text: str) -> tuple[tuple[frozenset[str], tuple[str, ...]], ...]:
    """The terms and the lowercased words of each paragraph of a passage's text (a table's
    row is one), kept for the passages searched most: stemming them is most of what
    choosing a section's passage costs (:meth:`KnowledgeIndex.closest_in_section`)."""
    return tuple(
        (frozenset(terms(paragraph)), tuple(_WORD.findall(paragraph.lower())))
        for paragraph in text.split("\n\n")
    )


def paragraph_terms(text: str, wanted: frozenset[str]) -> tuple[frozenset[str], ...]:
    """The terms of each paragraph of ``text``, with the question's terms (``wanted``)
    that two of its adjacent words make written as one, as a question's do in BM25
    (:func:`joined`): the docs write the verb apart ("they back up a store, restore it")
    and a question the noun ("restore a backup"). Only a pair whose first word begins one
    of the question's terms is stemmed: stemming every pair of every candidate passage
    cost 4.5 ms a search at 100,000 passages with a cold cache."""
    starts = {w[:i] for w in wanted for i in range(2, len(w))}
    found = []
    for own, words in _paragraphs(text):
        pairs = [a + b for a, b in itertools.pairwise(words) if a in starts]
        extra = frozenset(_stemmer().stemWords(pairs)) & wanted if pairs else frozenset()
        found.append(own | extra)
    return tuple(found)


def definitions(passages: Sequence[Passage]) -> dict[frozenset[str], list[int]]:
    """The terms the passages define (a paragraph opening "term: ...", the glossary's form;
    a file's name, "backup.md: ...", is a link, not a term), each as its set of
    :func:`terms`, with the rows of the passages that define it. A question asking what a
    term is ("In Chorus terms, what is a turn?") shares its words with every page that
    uses the term, and the definition's passage, cut from a long glossary section among
    its neighbours' definitions, was rarely among the three (docs/performance.md,
    "Knowledge base")."""
    defined: dict[frozenset[str], list[int]] = {}
    for row, passage in enumerate(passages):
        for paragraph in passage.text.split("\n\n"):
            match = _DEFINES.match(paragraph)
            if match is None or _TABLE_ROW.search(paragraph):
                continue
            name = match.group(1)
            if re.search(r"\.\w+$", name):
                continue
            if words := frozenset(terms(name)):
                defined.setdefault(words, []).append(row)
    return defined


def numbered(values: Sequence[Any]) -> np.ndarray:
    """Each value's number among the distinct values (their order of first appearance)."""
    numbers: dict[Any, int] = {}
    return np.array([numbers.setdefault(v, len(numbers)) for v in values], dtype=np.intp)


def hit_of(
    passage: Passage,
    passage_terms: frozenset[str],
    cosine: float,
    wanted: frozenset[str],
    score: float,
    lexical_rank: int | None,
    dense_rank: int | None,
    known: float,
    fused: Fused | None = None,
) -> Hit:
    """A found passage with what the confidence is computed from (``fused``: what
    :func:`combine` said of its file)."""
    # its own text's terms: the union of its paragraphs', which are cached
    own = frozenset().union(*paragraph_terms(passage.text, wanted))
    return Hit(
        passage=passage,
        score=score,
        file_voted=fused.file_voted if fused else True,
        dense_file=fused.dense_file if fused else True,
        margin=fused.margin if fused else 0.0,
        text_overlap=len(wanted & own) / len(wanted) if wanted else 0.0,
        cosine=cosine,
        overlap=len(wanted & passage_terms) / len(wanted) if wanted else 0.0,
        known=known,
        lexical_rank=lexical_rank,
        dense_rank=dense_rank,
    )


def rank_in(scores: np.ndarray, row: int) -> int | None:
    """The place of ``row`` in ``scores`` sorted best first (None when it scored nothing)."""
    if scores[row] <= 0:
        return None
    return int((scores > scores[row]).sum())


class IndexMeta(BaseModel):
    format: int
    model: str
    passages: int


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    from shared import meaning

    return meaning.embed(texts).astype(np.float32)


class KnowledgeIndex:
    """Passages, their embeddings and a BM25 index over them, ready to search."""

    def __init__(self, passages: list[Passage], embeddings: np.ndarray) -> None:
        if len(passages) != len(embeddings):
            raise IndexError_(f"{len(passages)} passages but {len(embeddings)} embeddings")
        if len(passages) > MAX_PASSAGES:
            raise IndexError_(f"{len(passages):,} passages, over the {MAX_PASSAGES:,} limit")
        self.passages = passages
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        self._clusters = _clusters(self.embeddings) if len(passages) >= CLUSTERED_FROM else None
        self._sources = numbered([p.source for p in passages])
        self._sections = numbered([(p.source, tuple(p.headings)) for p in passages])
        self._bm25 = self._lexical([p.searchable for p in passages])
        self._definitions = definitions(passages)

    def _lexical(self, texts: list[str]) -> Any:
        bm25s = _bm25s()

        # bm25s sets its own logger to DEBUG at import, which prints a line per index
        # wherever logging is configured (the agent's process): its warnings are enough.
        logging.getLogger("bm25s").setLevel(logging.WARNING)

        self._vocabulary: dict[str, int] = {}
        if not texts:
            return None
        tokens = bm25s.tokenize(
            texts,
            stopwords=sorted(_stopwords()),
            stemmer=_stemmer(),
            show_progress=False,
            return_ids=True,
        )
        self._vocabulary = tokens.vocab
        retriever = bm25s.BM25(csc_backend="numpy")  # its default, said: no SciPy needed
        retriever.index(tokens, show_progress=False)
        return retriever

    def __len__(self) -> int:
        return len(self.passages)

    def knows(self, word: str) -> bool:
        """Whether the knowledge base writes ``word``: its :func:`terms` (none for a stop
        word) are all in BM25's vocabulary."""
        found = terms(word)
        return bool(found) and all(term in self._vocabulary for term in found)

    # --- search -----------------------------------------------------------------------

    def _lexical_scores(self, query_terms: list[str]) -> np.ndarray:
        ids = [self._vocabulary[t] for t in query_terms if t in self._vocabulary]
        if self._bm25 is None or not ids:
            return np.zeros(len(self.passages), dtype=np.float32)
        scores: np.ndarray = self._bm25.get_scores(ids)
        return scores

    def _dense_rows(self, vector: np.ndarray) -> np.ndarray:
        """The rows the dense search compares ``vector`` with: all of them, or, past
        :data:`CLUSTERED_FROM` passages, those of the :data:`PROBES` clusters whose
        centres are closest (an inverted file: a 100,000 x 256 product reads 100 MB of
        memory a question, which alone took tens of milliseconds on a busy machine)."""
        if self._clusters is None:
            return np.arange(len(self.passages))
        centres, members = self._clusters
        nearest = _best(centres @ vector, PROBES)
        return np.concatenate([members[c] for c in nearest])

    def defining(self, query: str, context: str | None = None) -> np.ndarray:
        """The rows of the passages that define a term ``query`` names (all its words among
        the question's), when it asks what something is or means, or follows (``context``)
        a question that does ("and where does an utterance fit in?")."""
        if not self._definitions or not (
            _ASKS_WHAT.search(query) or (context and _ASKS_WHAT.search(context))
        ):
            return np.zeros(0, dtype=np.intp)
        asked = set(terms(query))
        rows = [r for words, found in self._definitions.items() if words <= asked for r in found]
        return np.unique(np.array(rows, dtype=np.intp))

    def candidates(
        self, query: str, context: str | None = None, defined: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows worth fusing (BM25's best :data:`DEPTH`, the dense search's and the
        passages defining the term asked about, :meth:`defining`) with their BM25 scores
        and dense cosines. A follow-up's ``context`` adds its own words' BM25 at
        :data:`CONTEXT_WEIGHT`, and its meaning joins the question's in the dense query."""
        lexical = self._lexical_scores(terms(query) + joined(query))
        if context:
            lexical = lexical + CONTEXT_WEIGHT * self._lexical_scores(
                terms(context) + joined(context)
            )
        text = f"{context} {query}" if context else query
        vector = embed_texts([text])[0]
        near = self._dense_rows(vector)
        near_scores = self.embeddings[near] @ vector
        matched = _best(lexical, DEPTH)
        rows = np.union1d(matched[lexical[matched] > 0], near[_best(near_scores, DEPTH)])
        if defined is None:
            defined = self.defining(query, context)
        rows = np.union1d(rows, defined)
        return rows, lexical[rows], self.embeddings[rows] @ vector

    def search(self, query: str, k: int = 3, context: str | None = None) -> list[Hit]:
        """The ``k`` best passages for ``query``, one per section. ``context`` (the
        previous question, for a follow-up like "and how much does it cost?") is searched
        with it, at a lower weight, so the follow-up's own words still lead."""
        if not self.passages or not query.strip():
            return []
        # One BLAS thread: the products here are a few thousand rows, and OpenBLAS's
        # second thread waiting for a busy core made the search at 100,000 passages
        # several times slower (bench/knowledge.py; the figure is in docs/performance.md).
        with _threads().limit(limits=1, user_api="blas"):
            return self._search(query, k, context)

    def closest_in_section(
        self, row: int, rows: np.ndarray, lexical: np.ndarray, wanted: frozenset[str]
    ) -> int:
        """The candidate (of ``rows``; ``lexical``, their BM25 scores: one holding none of
        the question's terms holds no more than ``row``) of ``row``'s section whose best
        paragraph holds most of the question's terms, ``row`` itself unless another holds
        more. The search finds a long section (a table cut into several passages) by all
        its passages' words, and the answer is the paragraph (a table's row) with the
        question's: "the default timeout for a call" is the timeout's row, not the retries'
        and threads' rows of the passage the fused score preferred. On a tie the most
        focused paragraph wins (the share of its terms that are the question's)."""
        rows = rows[(self._sections[rows] == self._sections[row]) & (lexical > 0)]
        if len(rows) < 2 or not wanted:
            return row

        def held(at: int) -> tuple[int, float]:
            # the most question terms in one paragraph, then the most focused paragraph
            # (the share of its terms that are the question's): a short row about the
            # thing over a long one that mentions it
            best = (0, 0.0)
            for words in paragraph_terms(self.passages[at].text, wanted):
                shared = len(wanted & words)
                best = max(best, (shared, shared / len(words) if words else 0.0))
            return best

        best = max(rows, key=held)
        return int(best) if held(int(best)) > held(row) else row

    def _with_definition(
        self, rows: np.ndarray, lexical: np.ndarray, dense: np.ndarray, k: int, defined: np.ndarray
    ) -> list[Fused]:
        """:func:`combine`'s ``k`` best, those after the first chosen with the passages
        defining the term asked about (``defined``, :meth:`defining`) at
        :data:`DEFINITION_WEIGHT` more. The first stays the search's own: it is what the
        knowledge skill quotes and its confidence weighs, and a glossary's definition
        first made the page about the thing a neighbouring page ("What is a tier?" went
        unanswered)."""
        sources, sections = self._sources[rows], self._sections[rows]
        fused = combine(lexical, dense, sources, sections, k)
        if not len(defined) or not fused:
            return fused
        bonus = DEFINITION_WEIGHT * np.isin(rows, defined)
        first = sections[fused[0].at]
        others = combine(lexical, dense, sources, sections, k + 1, bonus)
        return [fused[0], *[f for f in others if sections[f.at] != first][: k - 1]]

    def _search(self, query: str, k: int, context: str | None) -> list[Hit]:
        defined = self.defining(query, context)
        rows, lexical, dense = self.candidates(query, context, defined)
        own = self.embeddings[rows] @ embed_texts([query])[0] if context else dense
        wanted = frozenset(terms(query))
        # "iPhone" in "How do I restore a backup of my iPhone?" is in no document: the
        # strongest sign that a question is about something else, however close its words.
        known = len([t for t in wanted if t in self._vocabulary]) / len(wanted) if wanted else 0.0
        fused = self._with_definition(rows, lexical, dense, k, defined)
        chosen = {
            f.at: self.closest_in_section(int(rows[f.at]), rows, lexical, wanted) for f in fused
        }
        return [
            hit_of(
                self.passages[chosen[f.at]],
                frozenset(terms(self.passages[chosen[f.at]].searchable)),
                float(own[f.at]),
                wanted,
                f.score,
                rank_in(lexical, f.at),
                rank_in(dense, f.at),
                known,
                f,
            )
            for f in fused
        ]

    # --- the file ---------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """Write the file atomically: a temporary file in the same folder, then a rename."""
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = IndexMeta(format=FORMAT, model=MODEL, passages=len(self.passages))
        buffer = io.BytesIO()
        np.savez(
            buffer,
            meta=np.frombuffer(meta.model_dump_json().encode(), dtype=np.uint8),
            passages=np.frombuffer(_PASSAGES.dump_json(self.passages), dtype=np.uint8),
            digests=np.array([p.digest for p in self.passages], dtype="U32"),
            embeddings=self.embeddings,
        )
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(buffer.getvalue())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    @staticmethod
    def read(path: Path) -> tuple[list[Passage], np.ndarray, np.ndarray]:
        """The file's passages, digests and embeddings, checked."""
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = IndexMeta.model_validate_json(data["meta"].tobytes())
                if meta.format != FORMAT or meta.model != MODEL:
                    raise IndexError_(
                        f"{path}: format {meta.format} of {meta.model}, not {FORMAT} of "
                        f"{MODEL}: build it again (chorus knowledge build)"
                    )
                passages = _PASSAGES.validate_json(data["passages"].tobytes())
                return passages, data["digests"], data["embeddings"]
        except FileNotFoundError:
            raise IndexError_(f"{path}: no such file (chorus knowledge build makes it)") from None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
            if isinstance(exc, IndexError_):
                raise
            raise IndexError_(f"{path}: not a knowledge index ({exc})") from None

    @classmethod
    def load(cls, path: Path) -> KnowledgeIndex:
        passages, _, embeddings = cls.read(path)
        return cls(passages, embeddings)


@dataclass
class BuildReport:
    """What a build did."""

    passages: int
    embedded: int  # new or changed passages, embedded this time
    reused: int  # unchanged passages whose embeddings came from the old file
    removed: int  # passages of the old file that are gone


def build_index(
    passages: list[Passage],
    previous: Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[KnowledgeIndex, BuildReport]:
    """The index of ``passages``, reusing the embeddings of ``previous`` (an index file)
    for the passages it already had. ``progress(n)`` is told as each batch is embedded."""
    if len(passages) > MAX_PASSAGES:
        raise IndexError_(
            f"{len(passages):,} passages, over the {MAX_PASSAGES:,} limit of one index: "
            "split the knowledge base, or use a vector engine (docs/knowledge.md)"
        )
    known: dict[str, np.ndarray] = {}
    if previous is not None and previous.exists():
        try:
            _, digests, embeddings = KnowledgeIndex.read(previous)
            known = {str(d): e for d, e in zip(digests, embeddings, strict=True)}
        except IndexError_:
            known = {}  # another format or model: everything is embedded again
    wanted = [p.digest for p in passages]
    missing = sorted({d: i for i, d in enumerate(wanted) if d not in known}.values())
    for start in range(0, len(missing), EMBED_BATCH):
        batch = missing[start : start + EMBED_BATCH]
        rows = embed_texts([passages[i].searchable for i in batch])
        for i, row in zip(batch, rows, strict=True):
            known[wanted[i]] = row
        if progress is not None:
            progress(len(batch))
    embeddings = (
        np.stack([known[d] for d in wanted]) if passages else np.zeros((0, 256), np.float32)
    )
    kept = set(wanted)
    report = BuildReport(
        passages=len(passages),
        embedded=len(missing),
        reused=len(passages) - len(missing),
        removed=0 if previous is None else sum(1 for d in known if d not in kept),
    )
    return KnowledgeIndex(passages, embeddings), report
