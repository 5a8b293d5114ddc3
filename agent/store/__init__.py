"""Where the dialogue state lives: three narrow protocols (:class:`DialogStore`,
:class:`KeyStore`, :class:`QueueStore`), one :class:`Store` holding all three, SQLite and
MongoDB behind it."""

from agent.store.base import (
    DialogHead,
    DialogStore,
    KeyStore,
    QueueStore,
    Store,
    StoreUnavailable,
)

__all__ = [
    "DialogHead",
    "DialogStore",
    "KeyStore",
    "QueueStore",
    "Store",
    "StoreUnavailable",
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
