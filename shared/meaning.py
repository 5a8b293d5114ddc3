"""How close two short texts are in meaning, for services that match what a user said.

Word overlap is a poor judge of chat: "How old are you?" shares every word but one with
"How are you?", and "Have you ever been to Japan?" shares "have you" with a dozen
questions about the bot. A sentence embedding tells them apart. The model here is
WordLlama's ``l2_supercat`` (256 dimensions, MIT-licensed): token embeddings taken from a
large language model and averaged, 16 MB, shipped inside the ``wordllama`` package, so a
service loads it offline in under a second and embeds thousands of lines in milliseconds,
without a GPU or a model hub. ``wordllama`` and numpy are service dependencies, not the
SDK's: services that use this module list them in their own ``requirements.txt``.
"""

from __future__ import annotations

import importlib
import json
import mmap
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, lru_cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence


class _Model(Protocol):
    embedding: np.ndarray

    def embed(self, texts: Sequence[str], norm: bool = ...) -> np.ndarray: ...


#: The model's file of weights in the ``wordllama`` package, and its table's name there.
WEIGHTS = Path("weights") / "l2_supercat_256.safetensors"
TABLE = "embedding.weight"
#: The longest header of such a file read (the package's is 88 bytes).
HEADER_MOST = 1 << 20
#: A batch of this many texts or more is a service fitting its examples at start-up (the
#: FAQ's 30 questions, the intents' 107 examples, small talk's corpus): it gives back the
#: mapped table's pages it read (:func:`_pages_released`). A turn's texts (its utterance,
#: the knowledge skill's few sentences of a passage) keep theirs: reading pages given back
#: again cost 0.7 ms for five sentences.
RELEASE_FROM = 16


@cache
def _model() -> _Model:
    """The packaged model, loaded once per process. The package looks for its tokenizer
    under ``<cache_dir>/tokenizers`` and would download it from a hub when absent; pointing
    its cache at the package's own folder finds the copy the wheel ships, and downloads
    are disabled, so a missing file is an error here rather than a network call."""
    with _requests_deferred():
        import wordllama
        from wordllama import WordLlama

    folder = Path(wordllama.__file__).parent
    model = WordLlama.load(cache_dir=folder, disable_download=True)
    # The package widens its float16 table (32,000 tokens x 256) to float32: 32 MB held
    # for 16 MB of figures. The table is read instead where the package's file holds it,
    # mapped read-only (:func:`mapped_table`): the same float16 figures, of which a
    # process holds only the pages of the tokens it has embedded, pages the system may
    # take back and every process mapping the file shares. Where the file is not as
    # expected, a float16 copy in memory. Either way each row is the same number, and the
    # pooling multiplies it by a float32 mask, so the sums are float32 as before, figure
    # for figure (docs/performance.md, "The served agent's memory").
    table = mapped_table(folder / WEIGHTS, model.embedding.shape)
    model.embedding = table if table is not None else model.embedding.astype(np.float16)
    narrow: _Model = model
    return narrow


def mapped_table(path: Path, shape: tuple[int, ...]) -> np.ndarray | None:
    """The float16 table ``TABLE`` of the safetensors file ``path``, mapped read-only (a
    plain array over the file's pages), or None when the file is missing or unreadable, or
    holds no float16 table of ``shape`` (another version of the package)."""
    try:
        with path.open("rb") as file:
            size = int.from_bytes(file.read(8), "little")
            if not 0 < size <= HEADER_MOST:
                return None
            header = json.loads(file.read(size))
            entry = header[TABLE]
            begin, end = (int(offset) for offset in entry["data_offsets"])
            rows, columns = shape
            if entry["dtype"] != "F16" or tuple(entry["shape"]) != (rows, columns):
                return None
            if end - begin != rows * columns * 2:
                return None
            pages = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        start = 8 + size + begin
        if len(pages) < start + end - begin:
            return None
        table = np.frombuffer(pages, dtype="<f2", count=rows * columns, offset=start)
        return table.reshape(rows, columns)
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def _pages_released(table: np.ndarray) -> None:
    """The pages of a mapped table (:func:`mapped_table`) taken out of the process
    (``MADV_DONTNEED``): the services' examples embedded at start-up read nearly every
    page of it (14 of its 16 MB), and a turn then reads the rows of its few tokens, which
    come back from the system's cache of the file on their first read, unchanged (the
    file is mapped read-only). After every such batch, not only the last service's: which
    service fits last depends on the pipeline. A table in memory, or a system without the
    call: nothing."""
    base: object = table
    while isinstance(base, np.ndarray | memoryview):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    if isinstance(base, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        base.madvise(mmap.MADV_DONTNEED)


class _Deferred(ModuleType):
    """Stands for a module a package imports but uses only on a path not taken here: the
    real module is imported at the first use of one of its names."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self.__name__), name)


@contextmanager
def _requests_deferred() -> Iterator[None]:
    """``wordllama`` imports ``requests`` to download models, and downloads are disabled
    here: requests, urllib3 and charset_normalizer would be about 110 modules and 4 MB of
    the served agent's memory for nothing (docs/performance.md, "The served agent's
    memory"). While ``wordllama`` is imported, ``requests`` is a stand-in that imports the
    real one if ever used; then the stand-in is taken out of ``sys.modules`` again."""
    if "requests" in sys.modules:
        yield
        return
    sys.modules["requests"] = _Deferred("requests")
    try:
        yield
    finally:
        if isinstance(sys.modules.get("requests"), _Deferred):
            del sys.modules["requests"]


def embed(texts: Sequence[str]) -> np.ndarray:
    """One L2-normalised row per text, case ignored: a dot product of two rows is their
    cosine similarity (about 0.7 and up for paraphrases, under 0.4 for unrelated lines).
    One text is taken from :func:`meaning_of`'s cache (a copy of its row): the retrieval
    annotator embeds the utterance the intents annotator and the smalltalk skill embed."""
    if len(texts) == 1:
        return meaning_of(texts[0])[None, :].copy()
    return _embedded(texts)


def _embedded(texts: Sequence[str]) -> np.ndarray:
    """:func:`embed` without the cache."""
    if not texts:
        return np.zeros((0, 256), dtype=np.float32)
    # Lowercased: the model's tokens are case-sensitive ("how are you" and "How are you?"
    # score 0.26 as typed, 0.77 lowercased), and people type chat carelessly.
    model = _model()
    rows: np.ndarray = model.embed([text.lower() for text in texts], norm=False)
    if len(texts) >= RELEASE_FROM:
        _pages_released(model.embedding)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    # A text with no known token (empty, or only symbols) has no meaning: a zero row,
    # similar to nothing, instead of the package's division by zero.
    normalised: np.ndarray = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    return normalised


@lru_cache(maxsize=256)
def meaning_of(text: str) -> np.ndarray:
    """One text's row, kept (read-only): the intents annotator, its reading of the turn
    (:mod:`shared.reading`), the smalltalk skill (twice) and the retrieval annotator's
    search each weigh the same utterance, and in the agent's process they share this
    cache (threads too: the retrieval annotator runs in one)."""
    row: np.ndarray = _embedded([text])[0]
    row.flags.writeable = False  # shared by every caller
    return row


def similarities(text: str, rows: np.ndarray) -> np.ndarray:
    """Cosine similarity of ``text`` to each row of :func:`embed`'s output (-1..1)."""
    scores: np.ndarray = rows @ meaning_of(text)
    return scores
