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

fused by reciprocal rank fusion (each list gives ``1 / (RRF_K + rank)``), which needs no
score scales to agree. The BM25 index is built when the file is loaded (a second for
100,000 passages), so the file holds only what is costly to make again: the embeddings.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from pydantic import BaseModel, TypeAdapter

from shared.knowledge.passages import MAX_PASSAGES, Passage

#: Bumped when the file's layout changes; an older file is rebuilt, never misread.
FORMAT = 1
#: The embedding model, recorded in the file: another model's vectors are not comparable.
MODEL = "wordllama-l2_supercat-256"
#: Reciprocal rank fusion's constant (the original paper's 60): a lower rank counts less.
RRF_K = 60
#: How deep each half of the search looks before fusing.
DEPTH = 50
#: How much the follow-up's search with its context counts against its own.
CONTEXT_WEIGHT = 0.8
#: Passages embedded per call while building (bounds the memory of one call).
EMBED_BATCH = 256

_PASSAGES = TypeAdapter(list[Passage])
_WORD = re.compile(r"(?u)\b\w\w+\b")


class IndexError_(ValueError):
    """The index file is missing, unreadable or of another format; the message says which."""


@cache
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


@cache
def _stopwords() -> frozenset[str]:
    """scikit-learn's English stop words (318, "how" and "what" among them: a question's
    frame says nothing of its subject), with bm25s's own."""
    from bm25s.stopwords import STOPWORDS_EN
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(STOPWORDS_EN) | frozenset(ENGLISH_STOP_WORDS)


def terms(text: str) -> list[str]:
    """The words BM25 matches: lowercased, stop words out, stemmed ("restoring" → "restor").
    bm25s's own tokenizer pattern; its stemmer call, one word list at a time."""
    stop = _stopwords()
    words = [w for w in _WORD.findall(text.lower()) if w not in stop]
    stemmed: list[str] = _stemmer().stemWords(words)
    return stemmed


@dataclass(frozen=True)
class Hit:
    """A passage found, with what the search thought of it."""

    passage: Passage
    score: float  # the fused reciprocal-rank score
    cosine: float  # its dense similarity to the query (-1..1)
    overlap: float  # the share of the query's terms it contains (0..1)
    lexical_rank: int | None  # its place in the BM25 list (0 first), None if not in it
    dense_rank: int | None


class Ranked(NamedTuple):
    """One search's two lists of passages (row numbers, or a vector engine's ids), best
    first."""

    lexical: list[Any]
    dense: list[Any]


class Fused(NamedTuple):
    score: float
    lexical_rank: int | None  # in the query's own search (not its context's)
    dense_rank: int | None


def fuse(rankings: list[tuple[Ranked, float]], k: int) -> list[tuple[Any, Fused]]:
    """Reciprocal rank fusion of weighted searches: each place in each list adds
    ``weight / (RRF_K + rank)``; the ``k`` best, with their ranks in the first search."""
    scores: dict[Any, float] = {}
    for ranked, weight in rankings:
        for ids in ranked:
            for rank, key in enumerate(ids):
                scores[key] = scores.get(key, 0.0) + weight / (RRF_K + rank)
    first = rankings[0][0]
    lexical = {key: rank for rank, key in enumerate(first.lexical)}
    dense = {key: rank for rank, key in enumerate(first.dense)}
    best = sorted(scores, key=lambda key: -scores[key])[:k]
    return [(key, Fused(scores[key], lexical.get(key), dense.get(key))) for key in best]


def hit_of(
    passage: Passage,
    passage_terms: frozenset[str],
    embedding: np.ndarray,
    vector: np.ndarray,
    wanted: frozenset[str],
    fused: Fused,
) -> Hit:
    """A found passage with what the confidence is computed from."""
    return Hit(
        passage=passage,
        score=fused.score,
        cosine=float(np.dot(embedding, vector)),
        overlap=len(wanted & passage_terms) / len(wanted) if wanted else 0.0,
        lexical_rank=fused.lexical_rank,
        dense_rank=fused.dense_rank,
    )


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
        self._terms = [frozenset(terms(p.searchable)) for p in passages]
        self._bm25 = self._lexical([p.searchable for p in passages])

    def _lexical(self, texts: list[str]) -> Any:
        import bm25s

        # bm25s sets its own logger to DEBUG at import, which prints a line per index
        # wherever logging is configured (the agent's process): its warnings are enough.
        logging.getLogger("bm25s").setLevel(logging.WARNING)

        if not texts:
            return None
        tokens = bm25s.tokenize(
            texts,
            stopwords=sorted(_stopwords()),
            stemmer=_stemmer(),
            show_progress=False,
            return_ids=True,
        )
        self._vocabulary: dict[str, int] = tokens.vocab
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        return retriever

    def __len__(self) -> int:
        return len(self.passages)

    # --- search -----------------------------------------------------------------------

    def _lexical_scores(self, query_terms: list[str]) -> np.ndarray:
        ids = [self._vocabulary[t] for t in query_terms if t in self._vocabulary]
        if self._bm25 is None or not ids:
            return np.zeros(len(self.passages), dtype=np.float32)
        scores: np.ndarray = self._bm25.get_scores(ids)
        return scores

    def _rank(self, text: str, vector: np.ndarray) -> Ranked:
        """The rows BM25 and the dense search put first for ``text``, best first."""
        lexical = self._lexical_scores(terms(text))
        dense = self.embeddings @ vector
        lists = []
        for scores in (lexical, dense):
            depth = min(DEPTH, len(scores))
            top = np.argpartition(-scores, depth - 1)[:depth]
            top = top[np.argsort(-scores[top])]
            lists.append([int(r) for r in top if scores is dense or scores[r] > 0])
        return Ranked(lexical=lists[0], dense=lists[1])

    def search(self, query: str, k: int = 3, context: str | None = None) -> list[Hit]:
        """The ``k`` best passages for ``query``. ``context`` (the previous question, for a
        follow-up like "and how much does it cost?") is searched with it and fused in at
        a lower weight, so the follow-up's own words still lead."""
        if not self.passages or not query.strip():
            return []
        vector = embed_texts([query])[0]
        rankings = [(self._rank(query, vector), 1.0)]
        if context:
            joined = f"{context} {query}"
            rankings.append((self._rank(joined, embed_texts([joined])[0]), CONTEXT_WEIGHT))
        wanted = frozenset(terms(query))
        return [
            hit_of(self.passages[row], self._terms[row], self.embeddings[row], vector, wanted, f)
            for row, f in fuse(rankings, k)
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
