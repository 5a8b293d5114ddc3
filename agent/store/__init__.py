"""Where the dialogue state lives: SQLite or MongoDB behind one :class:`Store`.

A store is split by who uses it. Each kind of caller has a narrow protocol of its own
(:mod:`agent.store.base`): the turn (:class:`TurnStore`, the message flow), the reads
(:class:`DialogReader`: the read API, exports, replays), ratings (:class:`RatingStore`),
restores from a backup (:class:`RestoreStore`), the users' queues (:class:`QueueStore`),
idempotency keys (:class:`KeyStore`), handoffs (:class:`HandoffStore`) and the data
lifecycle (:class:`LifecycleStore`). A backend holds one part object per protocol
(``store.turns``, ``store.reader``, ...: :data:`~agent.store.base.PARTS`), and does itself
only what spans them: erasure (:class:`UserErasure`) and the connection's life
(:class:`StoreConnection`; opening it, with :func:`open_store`, upgrades the schema). The
composition root hands each caller its part.
"""

from agent.store.base import (
    DialogHead,
    DialogReader,
    HandoffStore,
    KeyStore,
    LifecycleStore,
    QueueStore,
    RatingStore,
    RestoreStore,
    Store,
    StoreConnection,
    StoreUnavailable,
    TurnStore,
    UserErasure,
)

__all__ = [
    "DialogHead",
    "DialogReader",
    "HandoffStore",
    "KeyStore",
    "LifecycleStore",
    "QueueStore",
    "RatingStore",
    "RestoreStore",
    "Store",
    "StoreConnection",
    "StoreUnavailable",
    "TurnStore",
    "UserErasure",
    "open_store",
]


async def open_store(url: str) -> Store:
    """The store for a database URL: ``sqlite:///path`` or ``mongodb://...``."""
    if url.startswith("sqlite://"):
        from agent.store.sqlite import SqliteStore

        return await SqliteStore.open(url)
    if url.startswith(("mongodb://", "mongodb+srv://")):
        from agent.store.mongo import MongoStore

        return await MongoStore.open(url)
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:///path or mongodb://host")
