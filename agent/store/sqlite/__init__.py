"""The embedded store: one SQLite file, so ``make run`` needs no database server.

One part per job, each in its module and all over one connection (:mod:`.base`, with the
schema): :mod:`.dialogs`, :mod:`.restore`, :mod:`.keys`, :mod:`.queues`, :mod:`.handoffs`
and :mod:`.lifecycle` (the protocols of :mod:`agent.store.base`). :class:`SqliteStore` holds
the parts and names which of them answers each operation.

Records are JSON documents in three tables (users, dialogs, utterances), one row per
utterance. Queries run directly on the event loop: each takes microseconds (WAL, no fsync
per commit), and handing them to a thread, as aiosqlite does, cost more than half the
agent's CPU per turn in the profile. No method awaits inside a transaction, so turns on one
loop cannot interleave their writes; between processes sharing the file, SQLite's own
locking (``BEGIN IMMEDIATE``) serialises them, and a statement that meets another
process's lock is tried again around an ``await`` (never by SQLite sleeping on the loop).
Attribute merges are single ``json_set`` statements, so concurrent merges of different
keys never lose each other; a key a JSON path cannot address (a ``\\`` or a control
character) is merged by one ``chorus_json_merge`` call in the same transaction instead
(:mod:`.jsontext`).

Nothing a client or a service sends is ever part of a statement's text: keys and values
alike are bound parameters (an attribute key travels inside a bound JSON path). A full
disk, a locked or unreadable file is :class:`StoreUnavailable` (503, retry later); a
statement refused for its data is :class:`StoreWriteRefused`. Erased rows are overwritten
(``secure_delete``) and the write-ahead log is checkpointed after an erasure, so an erased
user's text does not linger in the files. The write-ahead log is copied back into the
database file by a thread, not in the commits on the loop (:mod:`.checkpoint`).
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
from agent.store.sqlite.dialogs import SqliteDialogs
from agent.store.sqlite.handoffs import SqliteHandoffs
from agent.store.sqlite.jsontext import register
from agent.store.sqlite.keys import SqliteKeys
from agent.store.sqlite.lifecycle import SqliteLifecycle
from agent.store.sqlite.queues import SqliteQueues
from agent.store.sqlite.restore import SqliteRestore

__all__ = ["SqliteStore"]

log = logging.getLogger("chorus.store")

#: Seconds between two attempts at truncating the write-ahead log after an erasure.
_TRUNCATE_RETRY = 0.005


class SqliteStore:
    """:class:`agent.store.Store` on a local SQLite file: the dialogs, the idempotency keys,
    the queue and the data lifecycle, each a part of its own over one connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._base = SqliteBase(db)
        self._checkpointer: Checkpointer | None = None
        dialogs = SqliteDialogs(db)
        self.open_turn = dialogs.open_turn
        self.keyed_turn = dialogs.keyed_turn
        self.add_utterance = dialogs.add_utterance
        self.finish_turn = dialogs.finish_turn
        self.mark_interrupted = dialogs.mark_interrupted
        self.close_active_dialog = dialogs.close_active_dialog
        self.dialog = dialogs.dialog
        self.dialogs = dialogs.dialogs
        self.user_dialogs = dialogs.user_dialogs
        self.list_dialog_ids = dialogs.list_dialog_ids
        self.dialog_by_dp_agent_id = dialogs.dialog_by_dp_agent_id
        self.dialog_starts = dialogs.dialog_starts
        self.add_dialog_rating = dialogs.add_dialog_rating
        self.add_utterance_rating = dialogs.add_utterance_rating
        restore = SqliteRestore(db)
        self.restore_user = restore.restore_user
        self.stored_dialog_ids = restore.stored_dialog_ids
        self.utterance_dialogs = restore.utterance_dialogs
        self.restore_dialog = restore.restore_dialog
        keys = SqliteKeys(db)
        self.claim_key = keys.claim_key
        self.renew_keys = keys.renew_keys
        self.complete_key = keys.complete_key
        self.release_key = keys.release_key
        queues = SqliteQueues(db)
        self.take_place = queues.take_place
        self.first_in_queue = queues.first_in_queue
        self.renew_places = queues.renew_places
        self.leave = queues.leave
        self.note_turn = queues.note_turn
        self.running_turn = queues.running_turn
        self.interrupt = queues.interrupt
        self.interrupted = queues.interrupted
        handoffs = SqliteHandoffs(db)
        self.request_handoff = handoffs.request_handoff
        self.claim_handoff = handoffs.claim_handoff
        self.return_handoff = handoffs.return_handoff
        self.handoff = handoffs.handoff
        self.handoffs = handoffs.handoffs
        self.append_utterance = handoffs.append_utterance
        self.utterances_after = handoffs.utterances_after
        lifecycle = SqliteLifecycle(db)
        self.delete_closed = lifecycle.delete_closed
        self.close_idle = lifecycle.close_idle
        self.compact = lifecycle.compact
        self.sizes = lifecycle.sizes

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
