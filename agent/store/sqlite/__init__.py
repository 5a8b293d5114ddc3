"""The embedded store: one SQLite file, so ``make run`` needs no database server.

One part per kind of caller, each in its module and all over one connection (:mod:`.base`,
with the schema): :mod:`.turns`, :mod:`.reads`, :mod:`.ratings`, :mod:`.restore`,
:mod:`.keys`, :mod:`.queues`, :mod:`.handoffs` and :mod:`.lifecycle` (the protocols of
:mod:`agent.store.base`). :class:`SqliteStore` holds the parts, and does itself what spans
them: erasure and the connection.

Records are JSON documents in three tables (users, dialogs, utterances), one row per
utterance. Queries run directly on the event loop: each takes microseconds (WAL, no fsync
per commit), and handing them to a thread, as aiosqlite does, cost more of the agent's CPU
than the queries themselves (docs/performance.md, "SQLite runs on the event loop"). No
method awaits inside a transaction, so turns on one loop cannot interleave their writes;
between processes sharing the file, SQLite's own locking (``BEGIN IMMEDIATE``) serialises
them, and a statement that meets another process's lock is tried again around an ``await``
(never by SQLite sleeping on the loop). Attribute merges are single ``json_set`` statements,
so concurrent merges of different keys never lose each other; a key a JSON path cannot
address (a ``\\`` or a control character) is merged by one ``chorus_json_merge`` call in the
same transaction instead (:mod:`.jsontext`). Nothing a client or a service sends is ever
part of a statement's text: keys and values alike are bound parameters (an attribute key
travels inside a bound JSON path). A full disk, a locked or unreadable file is
:class:`StoreUnavailable` (503, retry later); a statement refused for its data is
:class:`StoreWriteRefused`. Erased rows are overwritten (``secure_delete``) and the write-
ahead log is checkpointed after an erasure, so an erased user's text does not linger in the
files. The write-ahead log is copied back into the database file by a thread, not in the
commits on the loop (:mod:`.checkpoint`).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time

from agent.store.base import StoreUnavailable
from agent.store.schema import behind
from agent.store.sqlite.base import (
    BUSY_BUDGET,
    SqliteBase,
    latest_version,
    migrate,
    path_of,
    stored_version,
    translated,
)
from agent.store.sqlite.checkpoint import Checkpointer
from agent.store.sqlite.handoffs import SqliteHandoffs
from agent.store.sqlite.jsontext import register
from agent.store.sqlite.keys import SqliteKeys
from agent.store.sqlite.lifecycle import SqliteLifecycle
from agent.store.sqlite.queues import SqliteQueues
from agent.store.sqlite.ratings import SqliteRatings
from agent.store.sqlite.reads import SqliteReads
from agent.store.sqlite.restore import SqliteRestore
from agent.store.sqlite.turns import SqliteTurns

__all__ = ["SqliteStore"]

log = logging.getLogger("chorus.store")

#: Seconds between two attempts at truncating the write-ahead log after an erasure.
_TRUNCATE_RETRY = 0.005


class SqliteStore:
    """:class:`agent.store.Store` on a local SQLite file: each part
    (:data:`agent.store.base.PARTS`) an object of its own over one connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._base = SqliteBase(db)
        self._checkpointer: Checkpointer | None = None
        self.turns = SqliteTurns(db)
        self.reader = SqliteReads(db)
        self.ratings = SqliteRatings(db)
        self.restore = SqliteRestore(db)
        self.keys = SqliteKeys(db)
        self.queues = SqliteQueues(db)
        self.handoffs = SqliteHandoffs(db)
        self.lifecycle = SqliteLifecycle(db)

    @classmethod
    async def open(cls, url: str) -> SqliteStore:
        path = path_of(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute(f"PRAGMA busy_timeout={int(BUSY_BUDGET * 1000)}")  # start-up may wait
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA secure_delete=ON")
        register(db)
        try:
            migrate(db, f"SQLite store {path}")
        except sqlite3.Error as exc:
            db.close()
            raise translated(exc) from exc
        except BaseException:
            db.close()
            raise
        # Serving: never wait inside a call on the loop; a busy statement is retried
        # around an await instead (SqliteBase._busy_retried). Nor copy the log back into
        # the file in a commit: a thread does it (agent.store.sqlite.checkpoint).
        db.execute("PRAGMA busy_timeout=0")
        db.execute("PRAGMA wal_autocheckpoint=0")
        store = cls(db)
        store._checkpointer = Checkpointer(path)
        store._checkpointer.start()
        return store

    @classmethod
    async def open_read_only(cls, url: str) -> SqliteStore:
        """The store as :meth:`open` gives it, except that nothing can be written: the file
        is opened read-only (SQLite refuses any write), neither upgraded nor switched to WAL,
        and no checkpoint thread runs, so the file keeps every byte (``chorus replay``).
        Without a write-ahead log beside it (no agent has the file open) it is opened
        ``immutable``, which creates no ``-wal`` or ``-shm`` file next to it either; with
        one, its reads go through the log, as the agent's do."""
        path = path_of(url)
        if not path.is_file():
            raise ValueError(f"no SQLite database at {path}")
        wal = path.with_name(path.name + "-wal")
        flags = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
        try:
            db = sqlite3.connect(
                f"{path.resolve().as_uri()}?{flags}",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise translated(exc) from exc
        try:
            version = stored_version(db, f"SQLite store {path}")
        except sqlite3.Error as exc:
            db.close()
            raise translated(exc) from exc
        except BaseException:
            db.close()
            raise
        if version is not None and version != latest_version():
            db.close()
            raise behind(f"SQLite store {path}", version, latest_version())
        register(db)
        return cls(db)

    async def delete_user(self, user_id: str) -> bool:
        user = "(SELECT id FROM users WHERE user_id = ?)"
        rows = await self._base.write(
            ("DELETE FROM idempotency_keys WHERE user_id = ?", [user_id]),
            ("DELETE FROM lines WHERE user_id = ?", [user_id]),
            ("DELETE FROM handoffs WHERE user_id = ?", [user_id]),
            (
                f"DELETE FROM utterances WHERE dialog_id IN (SELECT id FROM dialogs WHERE "
                f"human_id = {user})",
                [user_id],
            ),
            (f"DELETE FROM dialogs WHERE human_id = {user}", [user_id]),
            ("DELETE FROM users WHERE user_id = ? RETURNING id", [user_id]),
        )
        # Out of the write-ahead log into the (securely overwritten) database file. The
        # checkpoint thread may be copying the log at that moment (the pragma then answers
        # busy and truncates nothing): tried again around an await until it is done.
        deadline = time.monotonic() + BUSY_BUDGET
        while (await self._base.fetch_one("PRAGMA wal_checkpoint(TRUNCATE)"))[0] == 1:
            if time.monotonic() > deadline:  # another process keeps reading the log
                log.warning("write-ahead log not truncated after an erasure: in use")
                break
            await asyncio.sleep(_TRUNCATE_RETRY)
        return rows[-1] is not None

    async def ping(self) -> None:
        try:
            await self._base.fetch_one("SELECT 1")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite store: {exc}") from exc

    async def close(self) -> None:
        if self._checkpointer is not None:
            await asyncio.to_thread(self._checkpointer.stop)
        self._base.connection.close()
