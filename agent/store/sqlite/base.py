"""What the three parts of the SQLite store share: the connection, the schema and
how statements run."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter

from agent.state.models import BotUtterance, Human, HumanUtterance, Utterance
from agent.store.base import Place, StoreUnavailable, StoreWriteRefused
from agent.store.schema import FIRST_VERSION, before_first_release, newer
from agent.store.sqlite.jsontext import MERGE_FUNCTION, canonical, needs_escaping

log = logging.getLogger("chorus.store")

utterance_of: TypeAdapter[Utterance] = TypeAdapter(Utterance)
T = TypeVar("T")
#: How long a statement keeps trying while another process holds the database's write
#: lock, before the store counts as unavailable (503, retry later).
BUSY_BUDGET = 2.0
#: The first wait before trying a busy statement again, doubled up to the last.
_FIRST_BUSY_DELAY = 0.001
_LAST_BUSY_DELAY = 0.025
Statement = tuple[str, list[Any]]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL UNIQUE, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dialogs (
    id TEXT PRIMARY KEY, human_id TEXT NOT NULL, active INTEGER NOT NULL, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS dialogs_by_human ON dialogs (human_id, active);
CREATE UNIQUE INDEX IF NOT EXISTS one_active_dialog ON dialogs (human_id) WHERE active = 1;
CREATE INDEX IF NOT EXISTS dialogs_by_dp_agent_id ON dialogs (json_extract(doc, '$.dp_agent_id'))
    WHERE json_extract(doc, '$.dp_agent_id') IS NOT NULL;
CREATE TABLE IF NOT EXISTS idempotency_keys (
    user_id TEXT NOT NULL, key TEXT NOT NULL, reply TEXT, fingerprint TEXT, alive_until REAL,
    expires_at REAL, PRIMARY KEY (user_id, key));
CREATE INDEX IF NOT EXISTS idempotency_keys_by_expiry ON idempotency_keys (expires_at);
CREATE TABLE IF NOT EXISTS lines (
    user_id TEXT NOT NULL, place INTEGER NOT NULL, done INTEGER NOT NULL,
    alive_until REAL NOT NULL, utt_id TEXT, interrupt INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, place));
CREATE TABLE IF NOT EXISTS utterances (
    dialog_id TEXT NOT NULL, seq INTEGER NOT NULL, utt_id TEXT NOT NULL UNIQUE,
    speaker TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (dialog_id, seq));
"""
#: The handoffs of dialogs to people (:mod:`agent.store.sqlite.handoffs`): version 2.
_HANDOFFS = """
CREATE TABLE IF NOT EXISTS handoffs (
    dialog_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, state TEXT NOT NULL,
    requested_at REAL NOT NULL, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS handoffs_by_state ON handoffs (state, requested_at);
"""


def _add_handoffs(db: sqlite3.Connection) -> None:
    """Version 2: the ``handoffs`` table."""
    for statement in _HANDOFFS.split(";"):
        if statement.strip():
            db.execute(statement)


#: Upgrades, in order: ``UPGRADES[n]`` brings a database of version ``n + 1`` to ``n + 2``
#: (:mod:`agent.store.schema`), inside :func:`migrate`'s transaction. The schema above is
#: version 1; a new database runs them all too.
UPGRADES: Sequence[Callable[[sqlite3.Connection], None]] = (_add_handoffs,)
#: ``PRAGMA application_id`` of a database this build or a later one created: builds before
#: 1.0.0 left it 0, so their ``user_version`` is never read as this numbering ("Chor").
APPLICATION_ID = 0x43686F72
#: Primary result codes that mean the database cannot work right now (a full disk, an I/O
#: error, a lock held too long, a file that cannot be opened or written), not bad data.
_UNAVAILABLE_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
    }
)
#: Attribute keys per ``json_set`` call: SQLite caps a function's arguments (127 by default),
#: so a larger merge takes several statements.
_KEYS_PER_CALL = 50
_INSERT_UTTERANCE = (
    "INSERT INTO utterances (dialog_id, seq, utt_id, speaker, doc) VALUES (?, "
    "(SELECT COALESCE(MAX(seq), -1) + 1 FROM utterances WHERE dialog_id = ?), ?, ?, ?)"
)


def path_of(url: str) -> Path:
    """``sqlite:///data/chorus.db`` is relative, ``sqlite:////var/x.db`` absolute."""
    path = url.removeprefix("sqlite://").removeprefix("/")
    if not path:
        raise ValueError(f"no file in database URL {url!r}: use sqlite:///data/chorus.db")
    return Path(path if not url.startswith("sqlite:////") else "/" + path)


def merge_statements(
    table: str, path: tuple[str, ...], updates: dict[str, Any], row_id: str
) -> list[Statement]:
    """Merge ``updates`` into the object at ``path`` of the row's document.

    Plain keys: ``UPDATE table SET doc = json_set(doc, ?, json(?), ...)``, each key in a
    bound JSON path (``$.attributes."key"``), never in the statement's text. SQLite caps a
    function's arguments, so a large merge is several statements (of one transaction). A
    key a path cannot address (a ``\\`` or a control character: see
    :mod:`agent.store.sqlite.jsontext`) goes in one ``chorus_json_merge`` call instead, so
    it replaces its stored copy rather than adding another one."""
    plain = [(key, value) for key, value in updates.items() if not needs_escaping(key)]
    escaped = {key: value for key, value in updates.items() if needs_escaping(key)}
    prefix = "$" + "".join([f".{part}" for part in path])
    statements: list[Statement] = []
    for start in range(0, len(plain), _KEYS_PER_CALL):
        chunk = plain[start : start + _KEYS_PER_CALL]
        args: list[Any] = []
        for key, value in chunk:
            args += [f'{prefix}."{key}"', json_text(value)]
        pairs = ", ".join(["?, json(?)"] * len(chunk))
        statements.append(
            (f"UPDATE {table} SET doc = json_set(doc, {pairs}) WHERE id = ?", [*args, row_id])
        )
    if escaped:
        for key in escaped:
            if '"' in key:  # checked upstream: it would address something else on MongoDB
                raise StoreWriteRefused(f"attribute key {key!r} contains '\"'")
        statements.append(
            (
                f"UPDATE {table} SET doc = {MERGE_FUNCTION}(doc, ?, ?) WHERE id = ?",
                [canonical(list(path)), json_text(escaped), row_id],
            )
        )
    return statements


def json_text(value: Any) -> str:
    try:
        return canonical(value)
    except ValueError as exc:  # NaN, Infinity: checked upstream
        raise StoreWriteRefused(f"not storable as JSON: {exc}") from None


def document_text(model: BaseModel) -> str:
    try:
        return model.model_dump_json()
    except ValueError as exc:  # e.g. a lone surrogate: checked upstream
        raise StoreWriteRefused(f"not storable as JSON: {exc}") from None


def translated(exc: sqlite3.Error) -> Exception:
    """The store's exception for an SQLite error (see the module docstring)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _UNAVAILABLE_CODES:
        return StoreUnavailable(f"SQLite store: {exc}")
    if isinstance(exc, sqlite3.IntegrityError):
        return exc
    return StoreWriteRefused(f"SQLite store: {exc}")


def insert_utterance(dialog_id: str, utterance: HumanUtterance | BotUtterance) -> Statement:
    return (
        _INSERT_UTTERANCE,
        [dialog_id, dialog_id, utterance.utt_id, utterance.speaker, document_text(utterance)],
    )


def latest_version() -> int:
    """The schema version this build writes: the first and one per upgrade."""
    return FIRST_VERSION + len(UPGRADES)


def stored_version(db: sqlite3.Connection, where: str) -> int | None:
    """The database's schema version; None for a new (empty) one. A database of a build
    before 1.0.0 or of a newer Chorus is refused (:class:`SchemaRefused`)."""
    marked = db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    version: int = db.execute("PRAGMA user_version").fetchone()[0]
    if not marked:
        if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise before_first_release(where, version)
        return None
    if version > latest_version():
        raise newer(where, version, latest_version())
    return version


def migrate(db: sqlite3.Connection, where: str) -> None:
    """Create the schema in a new database, or run the upgrades an older one lacks, in one
    transaction (``BEGIN IMMEDIATE``): a start cut short leaves the database as it was, and
    of two agents starting at once the second finds the work done."""
    db.execute("BEGIN IMMEDIATE")
    try:
        version = stored_version(db, where)
        new = version is None
        if version is None:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            version = FIRST_VERSION
        for step in UPGRADES[version - FIRST_VERSION :]:
            # A new database is made at the first version and brought up to date at once:
            # "upgrading" is news only to the operator of one that held data.
            if not new:
                log.info("upgrading the SQLite schema from version %d to %d", version, version + 1)
            step(db)
            version += 1
        db.execute(f"PRAGMA user_version = {version}")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def leaving(place: Place) -> list[Statement]:
    """Leave the queue (see :mod:`agent.store.sqlite.queues`): done places below the
    newest are deleted, the newest keeps the count going."""
    return [
        (
            "UPDATE lines SET done = 1 WHERE user_id = ? AND place = ?",
            [place.user_id, place.number],
        ),
        left_behind(place),
    ]


def left_behind(place: Place) -> Statement:
    """The second half of :func:`leaving`, once ``place`` is done: the user's done places
    below the newest deleted."""
    return (
        "DELETE FROM lines WHERE user_id = ? AND done = 1 AND place < (SELECT MAX(place) "
        "FROM lines WHERE user_id = ?)",
        [place.user_id, place.user_id],
    )


def note(place: Place, utt_id: str) -> Statement:
    """Record on ``place`` the utterance its turn answers (see :mod:`.queues`)."""
    return (
        "UPDATE lines SET utt_id = ? WHERE user_id = ? AND place = ?",
        [utt_id, place.user_id, place.number],
    )


class SqliteBase:
    """One connection, and statements run on it (see :mod:`agent.store.sqlite`).

    The connection's ``busy_timeout`` is 0: SQLite's own wait for a lock another process
    holds is a sleep inside the call, which on the event loop stalls every turn of this
    agent (up to the whole timeout). A statement that finds the database busy is tried
    again after an ``asyncio.sleep`` instead (:meth:`_busy_retried`), within
    :data:`BUSY_BUDGET` seconds, after which the store is unavailable (503). A retry
    happens before a transaction starts (``BEGIN IMMEDIATE`` is what meets another
    writer), so no transaction ever spans an ``await``."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.connection = db

    async def _busy_retried(self, attempt: Callable[[], T]) -> T:
        deadline = time.monotonic() + BUSY_BUDGET
        delay = _FIRST_BUSY_DELAY
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as exc:
                busy = exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
                if not busy or time.monotonic() + delay > deadline:
                    raise translated(exc) from exc
            except sqlite3.Error as exc:
                raise translated(exc) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, _LAST_BUSY_DELAY)

    async def fetch_one(self, sql: str, args: Iterable[Any] = ()) -> Any:
        return await self._busy_retried(
            lambda: self.connection.execute(sql, tuple(args)).fetchone()
        )

    async def fetch_all(self, sql: str, args: Iterable[Any] = ()) -> list[Any]:
        rows: list[Any] = await self._busy_retried(
            lambda: self.connection.execute(sql, tuple(args)).fetchall()
        )
        return rows

    async def write(self, *statements: Statement) -> list[Any]:
        """Statements in one transaction; the first row each returned (or None)."""
        return await self._busy_retried(lambda: self._transaction(statements))

    async def write_if(
        self,
        fence: Statement,
        then: Sequence[Statement],
        otherwise: Callable[[], Sequence[Statement]],
    ) -> bool:
        """``then`` in one transaction if ``fence`` returns a row, else the statements
        ``otherwise`` makes (only then: the fence nearly always holds): the check and the
        writes it decides are one transaction, so nothing another process writes comes
        between them. Whether ``fence`` returned a row."""
        fenced: list[bool] = []

        def decided() -> Iterable[Statement]:
            fenced.append(self.connection.execute(*fence).fetchone() is not None)
            return then if fenced[-1] else otherwise()

        await self._busy_retried(lambda: self._transaction(decided))
        return fenced[-1]

    def _transaction(
        self, statements: Iterable[Statement] | Callable[[], Iterable[Statement]]
    ) -> list[Any]:
        """One attempt, on the loop and without an await: ``BEGIN IMMEDIATE`` fails at
        once (busy) while another process writes, and nothing has been done then.
        ``statements`` may be a function choosing them inside the transaction."""
        rows = []
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            for sql, args in statements() if callable(statements) else statements:
                rows.append(self.connection.execute(sql, args).fetchone())
            self.connection.execute("COMMIT")
        except BaseException:
            # SQLite rolls some failures (a full disk) back itself.
            if self.connection.in_transaction:
                self.connection.execute("ROLLBACK")
            raise
        return rows

    async def user(self, user_id: str) -> Human:
        """The user with that user id, created on first contact."""
        row = await self.fetch_one("SELECT doc FROM users WHERE user_id = ?", [user_id])
        if row is None:
            fresh = Human(user_external_id=user_id)
            await self.write(
                (
                    "INSERT OR IGNORE INTO users (id, user_id, doc) VALUES (?, ?, ?)",
                    [fresh.id, user_id, fresh.model_dump_json()],
                )
            )
            row = await self.fetch_one("SELECT doc FROM users WHERE user_id = ?", [user_id])
        return Human.model_validate_json(row[0])


#: Ids looked up per query (SQLite binds at most 32,766 parameters).
_CHUNK = 500


def chunks(ids: list[str]) -> list[list[str]]:
    """``ids`` in groups small enough to bind in one ``IN (...)``."""
    return [ids[start : start + _CHUNK] for start in range(0, len(ids), _CHUNK)]
