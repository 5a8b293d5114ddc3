"""The retrieval protocol over Qdrant, for a corpus past what one service's memory holds.

The same passages and embeddings as the embedded index (``chorus knowledge build``
writes them; :meth:`QdrantRetriever.upload` puts an index file into a collection), and the
same hybrid search: a dense query on the WordLlama vectors (cosine) and a sparse one on
the passages' stemmed terms, weighted by Qdrant's own IDF (``Modifier.IDF``: BM25's idea,
computed by the engine over the whole collection), fused the same way over the
candidates Qdrant returns, and scored by the same confidence. So
``KNOWLEDGE_ENGINE=qdrant`` changes where the search runs, not what it answers.

``qdrant-client`` talks to a Qdrant server (``KNOWLEDGE_QDRANT_URL``) or runs Qdrant's
embedded local mode in the process (``KNOWLEDGE_QDRANT_PATH``, a folder); the tests use
the local mode, the same client API a server answers. It is the optional ``qdrant`` extra.
"""

from __future__ import annotations

import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from shared.knowledge.index import (
    CONTEXT_WEIGHT,
    DEPTH,
    Hit,
    KnowledgeIndex,
    combine,
    embed_texts,
    hit_of,
    joined,
    numbered,
    rank_in,
    terms,
)
from shared.knowledge.passages import Passage

DENSE = "dense"
LEXICAL = "lexical"
#: Points written per upsert call.
BATCH = 512


def term_id(term: str) -> int:
    """A stable id for a term in the sparse vectors (CRC-32: the same in every process)."""
    return zlib.crc32(term.encode())


def sparse(words: list[str]) -> tuple[list[int], list[float]]:
    """A text's terms as a sparse vector: term ids and their counts."""
    counts = Counter(term_id(t) for t in words)
    return list(counts), [float(c) for c in counts.values()]


class QdrantRetriever:
    """A Qdrant collection searched as :class:`~shared.knowledge.retrieval.Retriever`."""

    def __init__(self, client: Any, collection: str) -> None:
        self.client = client
        self.collection = collection

    @classmethod
    def connect(
        cls, url: str | None = None, path: Path | None = None, collection: str = "knowledge"
    ) -> QdrantRetriever:
        """A server at ``url``, or the embedded local mode in the folder ``path``."""
        from qdrant_client import QdrantClient

        if (url is None) == (path is None):
            raise ValueError("give exactly one of KNOWLEDGE_QDRANT_URL or KNOWLEDGE_QDRANT_PATH")
        client = QdrantClient(url=url) if url else QdrantClient(path=str(path))
        return cls(client, collection)

    def upload(self, index: KnowledgeIndex) -> None:
        """Replace the collection with ``index``'s passages and embeddings."""
        from qdrant_client import models

        if self.client.collection_exists(self.collection):
            self.client.delete_collection(self.collection)
        self.client.create_collection(
            self.collection,
            vectors_config={
                DENSE: models.VectorParams(
                    size=index.embeddings.shape[1], distance=models.Distance.COSINE
                )
            },
            sparse_vectors_config={
                LEXICAL: models.SparseVectorParams(modifier=models.Modifier.IDF)
            },
        )
        points = []
        for number, (passage, vector) in enumerate(
            zip(index.passages, index.embeddings, strict=True)
        ):
            ids, values = sparse(terms(passage.searchable))
            points.append(
                models.PointStruct(
                    id=number,
                    vector={
                        DENSE: vector.tolist(),
                        LEXICAL: models.SparseVector(indices=ids, values=values),
                    },
                    payload={"passage": passage.model_dump(mode="json")},
                )
            )
        for start in range(0, len(points), BATCH):
            self.client.upsert(self.collection, points=points[start : start + BATCH])

    def _query(self, query: Any, using: str) -> list[Any]:
        found = self.client.query_points(
            self.collection, query=query, using=using, limit=DEPTH, with_payload=True
        )
        return list(found.points)

    def search(self, query: str, k: int = 3, context: str | None = None) -> list[Hit]:
        """The embedded index's search (:func:`~shared.knowledge.index.combine`) over the
        candidates Qdrant returns: the best :data:`DEPTH` of its sparse (IDF-weighted
        terms, the context's at :data:`CONTEXT_WEIGHT`) and of its dense query."""
        from qdrant_client import models

        if not query.strip():
            return []
        text = f"{context} {query}" if context else query
        vector = embed_texts([text])[0]
        # joined words ("back up" → backup) as the embedded index adds them; one the
        # collection lacks matches nothing
        words = [*terms(query), *joined(query)]
        own = set(words)
        words += [*terms(context), *joined(context)] if context else []
        ids, values = sparse(words)
        if context:
            weights = {term_id(t): (1.0 if t in own else CONTEXT_WEIGHT) for t in words}
            values = [weights[i] for i in ids]
        else:
            values = [1.0] * len(ids)
        lexical = (
            self._query(models.SparseVector(indices=ids, values=values), LEXICAL) if ids else []
        )
        dense = self._query(vector.tolist(), DENSE)
        candidates = {p.id: p for p in (*lexical, *dense)}
        if not candidates:
            return []
        keys = list(candidates)
        stored = {
            p.id: np.asarray(p.vector[DENSE], dtype=np.float32)
            for p in self.client.retrieve(self.collection, ids=keys, with_vectors=[DENSE])
        }
        lexical_scores = {p.id: p.score for p in lexical}
        lexical_array = np.array([lexical_scores.get(key, 0.0) for key in keys])
        dense_array = np.array([float(stored[key] @ vector) for key in keys])
        own_vector = embed_texts([query])[0] if context else vector
        passages = [Passage.model_validate(candidates[key].payload["passage"]) for key in keys]
        wanted = frozenset(terms(query))
        # The collection's vocabulary is the engine's: a term is known when a candidate
        # holds it (the sparse query returns the passages that hold its terms).
        held = frozenset().union(*(terms(p.searchable) for p in passages))
        known = len(wanted & held) / len(wanted) if wanted else 0.0
        return [
            hit_of(
                passages[f.at],
                frozenset(terms(passages[f.at].searchable)),
                float(stored[keys[f.at]] @ own_vector),
                wanted,
                f.score,
                rank_in(lexical_array, f.at),
                rank_in(dense_array, f.at),
                known,
                f,
            )
            for f in combine(
                lexical_array,
                dense_array,
                numbered([p.source for p in passages]),
                numbered([(p.source, tuple(p.headings)) for p in passages]),
                k,
            )
        ]
