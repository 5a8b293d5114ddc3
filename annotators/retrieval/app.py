"""Retrieval: the knowledge base's best passages for the newest human utterance.

Output (under ``annotations["retrieval"]``, :class:`shared.knowledge.retrieval.Retrieved`)::

    {"query": "How do I restore a backup?", "context": null,
     "passages": [{"source": "docs/backup.md", "headings": ["Backup and restore", "Restoring"],
                   "section": "Restoring", "link": "docs/backup.md#restoring",
                   "text": "...", "score": 0.0328, "confidence": 0.93}, ...]}

The service keeps nothing of its own: the knowledge base is an index file
(``KNOWLEDGE_INDEX``, made by ``chorus knowledge build``), read when the service starts and
again whenever the file is replaced (its size, inode or modification time change; the build
renames a whole new file into place), so a new build is served without a restart and every
replica serves the same file. A short follow-up that refers back ("and how do I undo it?")
is searched with the human's previous utterance (the service's ``context_window`` must
reach it: 3 holds the human, the bot's answer and the human again).

Without an index file the service still starts and answers an empty ``passages`` list: a
knowledge base not built yet is no reason to stop the bot. ``KNOWLEDGE_SOURCE`` names a
folder to build the index from when its file is missing (the compose stack mounts docs/
there). ``KNOWLEDGE_ENGINE=qdrant`` searches a Qdrant collection instead
(:mod:`shared.knowledge.qdrant`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.sdk import DialogView, Service
from shared import spelling
from shared.knowledge.index import Hit, IndexError_, KnowledgeIndex, build_index
from shared.knowledge.passages import read_folder
from shared.knowledge.retrieval import (
    TOP_K,
    Retrieved,
    Retriever,
    follow_up_context,
    read_as_asked,
    retrieve,
)

logger = logging.getLogger(__name__)

#: Where ``chorus run`` builds the index of docs/, and where the service looks by default.
DEFAULT_INDEX = Path(".cache/knowledge/docs.npz")
#: Annotations kept per index file, the most recent: small talk repeats itself ("hi",
#: "thanks", "ok"), and the same question after the same one finds the same passages in
#: the same file, so a repeated one costs no search (docs/performance.md, "Half the CPU").
SEARCHES_KEPT = 512


class RetrievalSettings(BaseSettings):
    """``KNOWLEDGE_*`` variables (docs/configuration.md, "Knowledge base")."""

    model_config = SettingsConfigDict(env_prefix="KNOWLEDGE_", extra="ignore")

    index: Path = Field(default=DEFAULT_INDEX, description="the index file to serve")
    source: Path | None = Field(
        default=None, description="a folder to build the index from when the file is missing"
    )
    top_k: int = Field(
        default=TOP_K, ge=1, le=20, description="passages per turn (the LLM is given them all)"
    )
    engine: Literal["embedded", "qdrant"] = Field(default="embedded")
    qdrant_url: str | None = Field(default=None, description="a Qdrant server")
    qdrant_path: Path | None = Field(default=None, description="Qdrant's embedded local mode")
    qdrant_collection: str = Field(default="knowledge", min_length=1)


class _Empty:
    """The engine while no index exists: it finds nothing."""

    def search(self, query: str, k: int = 3, context: str | None = None) -> list[Hit]:
        return []


class ReloadingIndex:
    """The index file's current contents: each search first checks whether the file was
    replaced (one ``stat``, microseconds) and, if so, loads the new one; a file that fails
    to load leaves the old index serving and is logged. The annotations of the last
    :data:`SEARCHES_KEPT` searches of the index loaded are kept (:meth:`answer`), and
    forgotten with it."""

    def __init__(self, path: Path, source: Path | None = None) -> None:
        self.path = path
        self.source = source
        self._seen: tuple[int, int, int] | None = None
        self._engine: Retriever = _Empty()
        self._lock = threading.Lock()
        self.loads = 0
        #: the annotations of ``_found_in``, the engine they were found in, by question,
        #: follow-up context and passages asked for, oldest first
        self._found: OrderedDict[tuple[str, str | None, int], Retrieved] = OrderedDict()
        self._found_in: Retriever | None = None
        self._found_lock = threading.Lock()

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (stat.st_ino, stat.st_size, stat.st_mtime_ns)

    def build_if_missing(self) -> None:
        """Build the file from :attr:`source` when there is none yet; its files are
        named from inside it (``docs/backup.md`` for ``<source>/docs/backup.md``)."""
        if self.source is None or self.path.exists():
            return
        corpus = read_folder(self.source)
        for name, why in corpus.skipped.items():
            logger.warning("knowledge: %s skipped: %s", name, why)
        index, _ = build_index(corpus.passages)
        index.save(self.path)

    def current(self) -> Retriever:
        signature = self._signature()
        if signature == self._seen:
            return self._engine
        with self._lock:
            if signature != self._seen:
                self._seen = signature
                if signature is None:
                    self._engine = _Empty()
                    logger.warning("knowledge: no index at %s; passages stay empty", self.path)
                else:
                    try:
                        self._engine = KnowledgeIndex.load(self.path)
                        self.loads += 1
                        logger.info("knowledge: loaded %s", self.path)
                    except IndexError_ as exc:
                        logger.error("knowledge: %s; the previous index still serves", exc)
        return self._engine

    def search(self, query: str, k: int = 3, context: str | None = None) -> list[Hit]:
        return self.current().search(query, k=k, context=context)

    def knows(self, word: str) -> bool:
        """Whether the index loaded last writes ``word`` (none while there is no index);
        no look at the file, which the turn's search makes."""
        engine = self._engine
        return isinstance(engine, KnowledgeIndex) and engine.knows(word)

    def kept(self, question: str, previous: str | None, k: int) -> Retrieved | None:
        """:meth:`answer`'s annotation when it is kept for the file served now, or None
        (without searching): a repeated question needs no thread (:func:`create_service`)."""
        engine = self.current()
        key = (question, follow_up_context(question, previous), k)
        with self._found_lock:
            if self._found_in is not engine:  # a new file: its searches are new
                self._found.clear()
                self._found_in = engine
            found = self._found.get(key)
            if found is not None:
                self._found.move_to_end(key)
            return found

    def answer(self, question: str, previous: str | None, k: int) -> Retrieved:
        """:func:`retrieve`'s annotation, searched now and kept (read-only: the SDK sends a
        copy); :meth:`kept` is asked first, on the event loop."""
        engine = self.current()
        found = retrieve(engine, question, previous, k=k)
        with self._found_lock:
            if self._found_in is engine:
                self._found[(question, found.context, k)] = found
                if len(self._found) > SEARCHES_KEPT:
                    self._found.popitem(last=False)
        return found


def engine_for(settings: RetrievalSettings) -> Retriever:
    """The configured engine."""
    if settings.engine == "qdrant":
        from shared.knowledge.qdrant import QdrantRetriever

        return QdrantRetriever.connect(
            url=settings.qdrant_url,
            path=settings.qdrant_path,
            collection=settings.qdrant_collection,
        )
    index = ReloadingIndex(settings.index, settings.source)
    index.build_if_missing()
    index.current()
    return index


def previous_human(dialog: DialogView, knows: Callable[[str], bool] | None = None) -> str | None:
    """The human's utterance before the newest one, if the window holds it, read as the
    question is (:func:`shared.knowledge.retrieval.read_as_asked`)."""
    humans = [u.text for u in dialog.utterances if u.speaker == "human"]
    # only that one read: the newest is the question, which the caller has read already
    return read_as_asked(humans[-2], knows) if len(humans) > 1 else None


def kept(engine: Retriever, question: str, previous: str | None, k: int) -> Retrieved | None:
    """The annotation ``engine`` kept for this question, if it keeps them."""
    return engine.kept(question, previous, k) if isinstance(engine, ReloadingIndex) else None


def answer(engine: Retriever, question: str, previous: str | None, k: int) -> Retrieved:
    """The annotation, searched now (after :func:`kept` found none), and kept by ``engine``
    if it keeps them (a Qdrant collection changes without the service knowing: its
    searches are not kept)."""
    if isinstance(engine, ReloadingIndex):
        return engine.answer(question, previous, k)
    return retrieve(engine, question, previous, k=k)


def create_service(engine: Retriever, top_k: int = TOP_K) -> Service:
    service = Service(
        "retrieval",
        description="The knowledge base's passages for the turn.",
        never_changes_view=True,
    )
    spelling.warm()  # the spelling dictionary loaded now, not on the first turn

    @service.annotator
    async def annotate(dialog: DialogView) -> Retrieved:
        # "how do i bakup chorus": careless typing read the careful way (shared/spelling.py),
        # the words the knowledge base writes ("uvicorn", "failover") as typed
        knows = engine.knows if isinstance(engine, ReloadingIndex) else None
        question = read_as_asked(dialog.human_utterance.text, knows)
        previous = previous_human(dialog, knows)
        # A question searched before is answered at once, on the event loop. A new one is
        # CPU work (or a Qdrant request): searched in a worker thread, so the other
        # annotators' turns go on meanwhile. A thread's hand-off, on every turn, was what
        # the LLM's first token waited for (docs/performance.md, "Half the CPU").
        found = kept(engine, question, previous, top_k)
        if found is not None:
            return found
        return await asyncio.to_thread(answer, engine, question, previous, top_k)

    return service


def service_from_environment() -> Service:
    """The service for the ``KNOWLEDGE_*`` settings; a bad one stops it, naming the
    variable."""
    try:
        settings = RetrievalSettings()
    except ValidationError as exc:
        problems = "; ".join(
            f"KNOWLEDGE_{str(e['loc'][0]).upper()}: {e['msg']}" for e in exc.errors()
        )
        raise SystemExit(f"retrieval: bad settings: {problems}") from None
    return create_service(engine_for(settings), settings.top_k)


def __getattr__(name: str) -> object:
    """``app`` for uvicorn (``annotators.retrieval.app:app``), built when first asked for:
    importing the module reads no setting and loads no index."""
    if name == "app":
        app = service_from_environment().app
        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
