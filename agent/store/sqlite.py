"""The embedded store: one SQLite file, so ``make run`` needs no database server.

Records are JSON documents in three tables (users, dialogs, utterances), one row per
utterance. Queries run directly on the event loop: each takes microseconds (WAL, no fsync
per commit), and handing them to a thread, as aiosqlite does, cost more than half the
agent's CPU per turn in the profile. No method awaits inside a transaction, so turns on one
loop cannot interleave their writes; between processes sharing the file, SQLite's own
locking (``BEGIN IMMEDIATE``) serialises them. Attribute merges are single ``json_set``
statements, so concurrent merges of different keys never lose each other.

Nothing a client or a service sends is ever part of a statement's text: keys and values
alike are bound parameters (an attribute key travels inside a bound JSON path). A full
disk, a locked or unreadable file is :class:`StoreUnavailable` (503, retry later); a
statement refused for its data is :class:`StoreWriteRefused`. Erased rows are overwritten
(``secure_delete``) and the write-ahead log is checkpointed after an erasure, so an erased
user's text does not linger in the files.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from agent.state.models import (
    Bot,
    BotUtterance,
    Dialog,
    Human,
    HumanUtterance,
    Utterance,
    new_id,
    utc_now,
)
from agent.store.base import (
    Claim,
    ClaimStatus,
    DialogHead,
    JsonDict,
    StoreUnavailable,
    StoreWriteRefused,
)

_utterance: TypeAdapter[Utterance] = TypeAdapter(Utterance)
Statement = tuple[str, list[Any]]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY, external_id TEXT NOT NULL UNIQUE, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dialogs (
    id TEXT PRIMARY KEY, human_id TEXT NOT NULL, active INTEGER NOT NULL, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS dialogs_by_human ON dialogs (human_id, active);
CREATE UNIQUE INDEX IF NOT EXISTS one_active_dialog ON dialogs (human_id) WHERE active = 1;
CREATE TABLE IF NOT EXISTS messages (
    user TEXT NOT NULL, key TEXT NOT NULL, reply TEXT, fingerprint TEXT, alive_until REAL,
    PRIMARY KEY (user, key));
CREATE TABLE IF NOT EXISTS turn_queue (
    user TEXT NOT NULL, place INTEGER NOT NULL, done INTEGER NOT NULL, alive_until REAL NOT NULL,
    PRIMARY KEY (user, place));
CREATE TABLE IF NOT EXISTS utterances (
    dialog_id TEXT NOT NULL, seq INTEGER NOT NULL, utt_id TEXT NOT NULL UNIQUE,
    speaker TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (dialog_id, seq));
"""
#: Columns added since the first release: (table, column, type), added at open when missing,
#: so a database written by an earlier release keeps its data and gains them.
_ADDED_COLUMNS = (("messages", "fingerprint", "TEXT"), ("messages", "alive_until", "REAL"))
#: Primary result codes that mean the database cannot work right now (a full disk, an I/O
#: error, a lock held too long, a file that cannot be opened or written), not bad data.
_UNAVAILABLE_CODES = frozenset({
    sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PROTOCOL,
})
#: Attribute keys per ``json_set`` call: SQLite caps a function's arguments (127 by default),
#: so a larger merge takes several statements.
_KEYS_PER_CALL = 50
_INSERT_UTTERANCE = (
    "INSERT INTO utterances (dialog_id, seq, utt_id, speaker, doc) VALUES (?, "
    "(SELECT COALESCE(MAX(seq), -1) + 1 FROM utterances WHERE dialog_id = ?), ?, ?, ?)"
)


def _path_of(url: str) -> Path:
    """``sqlite:///data/chorus.db`` is relative, ``sqlite:////var/x.db`` absolute."""
    path = url.removeprefix("sqlite://").removeprefix("/")
    if not path:
        raise ValueError(f"no file in database URL {url!r}: use sqlite:///data/chorus.db")
    return Path(path if not url.startswith("sqlite:////") else "/" + path)


def _merges(table: str, prefix: str, updates: dict[str, Any], row_id: str) -> list[Statement]:
    """``UPDATE table SET doc = json_set(doc, ?, json(?), ...)``: each key goes in a bound
    JSON path (``$.attributes."key"``), never into the statement's text. SQLite caps a
    function's arguments, so a large merge is several statements (of one transaction)."""
    items = list(updates.items())
    statements: list[Statement] = []
    for start in range(0, len(items), _KEYS_PER_CALL):
        chunk = items[start:start + _KEYS_PER_CALL]
        args: list[Any] = []
        for key, value in chunk:
            if '"' in key:  # checked upstream; a quote would end the path's label
                raise StoreWriteRefused(f"attribute key {key!r} contains '\"'")
            args += [f'{prefix}."{key}"', _json(value)]
        pairs = ", ".join(["?, json(?)"] * len(chunk))
        statements.append((f"UPDATE {table} SET doc = json_set(doc, {pairs}) WHERE id = ?",
                           [*args, row_id]))
    return statements


def _json(value: Any) -> str:
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError as exc:  # NaN, Infinity: checked upstream
        raise StoreWriteRefused(f"not storable as JSON: {exc}") from None


def _document(model: BaseModel) -> str:
    try:
        return model.model_dump_json()
    except ValueError as exc:  # e.g. a lone surrogate: checked upstream
        raise StoreWriteRefused(f"not storable as JSON: {exc}") from None


def _translated(exc: sqlite3.Error) -> Exception:
    """The store's exception for an SQLite error (see the module docstring)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _UNAVAILABLE_CODES:
        return StoreUnavailable(f"SQLite store: {exc}")
    if isinstance(exc, sqlite3.IntegrityError):
        return exc
    return StoreWriteRefused(f"SQLite store: {exc}")


def _insert_utterance(dialog_id: str, utterance: HumanUtterance | BotUtterance) -> Statement:
    return (_INSERT_UTTERANCE, [dialog_id, dialog_id, utterance.utt_id, utterance.speaker,
                                _document(utterance)])


def _add_missing_columns(db: sqlite3.Connection) -> None:
    for table, column, kind in _ADDED_COLUMNS:
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


class SqliteStore:
    """:class:`agent.store.Store` on a local SQLite file."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    @classmethod
    async def open(cls, url: str) -> SqliteStore:
        path = _path_of(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=2000")
        db.execute("PRAGMA secure_delete=ON")
        try:
            db.executescript(_SCHEMA)
            _add_missing_columns(db)
        except sqlite3.Error as exc:
            db.close()
            raise _translated(exc) from exc
        return cls(db)

    def _one(self, sql: str, args: Iterable[Any] = ()) -> Any:
        try:
            return self._db.execute(sql, tuple(args)).fetchone()
        except sqlite3.Error as exc:
            raise _translated(exc) from exc

    def _all(self, sql: str, args: Iterable[Any] = ()) -> list[Any]:
        try:
            return self._db.execute(sql, tuple(args)).fetchall()
        except sqlite3.Error as exc:
            raise _translated(exc) from exc

    def _write(self, *statements: Statement) -> list[Any]:
        """Statements in one transaction; the first row each returned (or None)."""
        rows = []
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    rows.append(self._db.execute(sql, args).fetchone())
                self._db.execute("COMMIT")
            except BaseException:
                # SQLite rolls some failures (a full disk) back itself.
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise _translated(exc) from exc
        return rows

    async def open_turn(self, external_id: str, channel_type: str,
                        limit: int) -> tuple[Human, DialogHead, list[Utterance]]:
        human = await self.human(external_id)
        dialog = await self.active_dialog(human, channel_type)
        return human, dialog, await self.recent_utterances(dialog.dialog_id, limit)

    async def human(self, external_id: str) -> Human:
        row = self._one("SELECT doc FROM users WHERE external_id = ?", [external_id])
        if row is None:
            fresh = Human(user_external_id=external_id)
            self._write(("INSERT OR IGNORE INTO users (id, external_id, doc) VALUES (?, ?, ?)",
                         [fresh.id, external_id, fresh.model_dump_json()]))
            row = self._one("SELECT doc FROM users WHERE external_id = ?", [external_id])
        return Human.model_validate_json(row[0])

    async def active_dialog(self, human: Human, channel_type: str) -> DialogHead:
        row = self._one("SELECT doc FROM dialogs WHERE human_id = ? AND active = 1", [human.id])
        if row is not None:
            return DialogHead.model_validate_json(row[0])
        head = DialogHead(dialog_id=new_id(), channel_type=channel_type, date_start=utc_now(),
                          human_id=human.id, bot=Bot())
        try:
            self._write(("INSERT INTO dialogs (id, human_id, active, doc) VALUES (?, ?, 1, ?)",
                         [head.dialog_id, human.id, head.model_dump_json()]))
        except sqlite3.IntegrityError:  # another process opened it first: use theirs
            row = self._one("SELECT doc FROM dialogs WHERE human_id = ? AND active = 1",
                            [human.id])
            return DialogHead.model_validate_json(row[0])
        return head

    async def recent_utterances(self, dialog_id: str, limit: int) -> list[Utterance]:
        rows = self._all(
            "SELECT doc FROM utterances WHERE dialog_id = ? ORDER BY seq DESC LIMIT ?",
            [dialog_id, limit],
        )
        return [_utterance.validate_json(row[0]) for row in reversed(rows)]

    async def add_utterance(self, dialog_id: str, utterance: HumanUtterance) -> None:
        self._write(_insert_utterance(dialog_id, utterance))

    async def finish_turn(
        self, dialog_id: str, human_id: str, utterance: HumanUtterance,
        bot_utterance: BotUtterance, human_attributes: dict[str, Any],
        bot_attributes: dict[str, Any], *, human_profile: dict[str, Any] | None = None,
        replace_human_attributes: bool = False,
    ) -> None:
        statements: list[Statement] = [
            ("UPDATE utterances SET doc = ? WHERE utt_id = ?",
             [_document(utterance), utterance.utt_id]),
            _insert_utterance(dialog_id, bot_utterance),
        ]
        if replace_human_attributes:
            statements.append(("UPDATE users SET doc = json_set(doc, '$.attributes', json(?)) "
                               "WHERE id = ?", [_json(human_attributes), human_id]))
        else:
            statements += _merges("users", "$.attributes", human_attributes, human_id)
        statements += _merges("users", "$.profile", human_profile or {}, human_id)
        statements += _merges("dialogs", "$.bot.attributes", bot_attributes, dialog_id)
        self._write(*statements)

    async def close_active_dialog(self, external_id: str) -> str | None:
        (row,) = self._write((
            "UPDATE dialogs SET active = 0, doc = json_set(doc, '$.date_finish', ?) "
            "WHERE active = 1 AND human_id = (SELECT id FROM users WHERE external_id = ?) "
            "RETURNING id",
            [utc_now().isoformat(), external_id],
        ))
        return None if row is None else str(row[0])

    def _dialog(self, head_doc: str, human: Human) -> Dialog:
        head = DialogHead.model_validate_json(head_doc)
        rows = self._all("SELECT doc FROM utterances WHERE dialog_id = ? ORDER BY seq",
                         [head.dialog_id])
        return Dialog(
            **head.model_dump(exclude={"human_id"}), human=human,
            utterances=[_utterance.validate_json(row[0]) for row in rows],
        )

    async def dialog(self, dialog_id: str) -> Dialog | None:
        row = self._one("SELECT d.doc, u.doc FROM dialogs d JOIN users u ON u.id = d.human_id "
                        "WHERE d.id = ?", [dialog_id])
        if row is None:
            return None
        return self._dialog(row[0], Human.model_validate_json(row[1]))

    async def user_dialogs(self, external_id: str) -> list[Dialog] | None:
        user = self._one("SELECT id, doc FROM users WHERE external_id = ?", [external_id])
        if user is None:
            return None
        human = Human.model_validate_json(user[1])
        rows = self._all("SELECT doc FROM dialogs WHERE human_id = ? "
                         "ORDER BY rowid", [user[0]])  # creation order: dates tie within a ms
        return [self._dialog(row[0], human) for row in rows]

    async def rate_dialog(self, external_id: str, dialog_id: str, rating: float) -> bool:
        (row,) = self._write((
            "UPDATE dialogs SET doc = json_set(doc, '$.rating', ?) WHERE id = ? AND "
            "human_id = (SELECT id FROM users WHERE external_id = ?) RETURNING id",
            [rating, dialog_id, external_id],
        ))
        return row is not None

    async def rate_utterance(self, external_id: str, utt_id: str, rating: float) -> bool:
        (row,) = self._write((
            "UPDATE utterances SET doc = json_set(doc, '$.rating', ?) WHERE utt_id = ? "
            "AND speaker = 'bot' AND dialog_id IN (SELECT d.id FROM dialogs d JOIN users u "
            "ON u.id = d.human_id WHERE u.external_id = ?) RETURNING utt_id",
            [rating, utt_id, external_id],
        ))
        return row is not None

    async def claim_message(self, external_id: str, key: str, fingerprint: str,
                            lease_until: datetime, now: datetime) -> Claim:
        (claimed,) = self._write((
            "INSERT INTO messages (user, key, fingerprint, alive_until) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (user, key) DO UPDATE SET fingerprint = excluded.fingerprint, "
            "alive_until = excluded.alive_until WHERE messages.reply IS NULL "
            "AND COALESCE(messages.alive_until, 0) < ? "
            "AND COALESCE(messages.fingerprint, excluded.fingerprint) = excluded.fingerprint "
            "RETURNING key", [external_id, key, fingerprint, lease_until.timestamp(),
                              now.timestamp()]))
        if claimed is not None:
            return Claim(ClaimStatus.CLAIMED)
        row = self._one("SELECT reply, fingerprint FROM messages WHERE user = ? AND key = ?",
                        [external_id, key])
        if row is None:  # released in between: the next try claims it
            return Claim(ClaimStatus.IN_FLIGHT)
        reply, claimed_for = row
        if claimed_for is not None and claimed_for != fingerprint:
            return Claim(ClaimStatus.OTHER_MESSAGE)
        if reply is None:
            return Claim(ClaimStatus.IN_FLIGHT)
        return Claim(ClaimStatus.ANSWERED, json.loads(reply))

    async def renew_claims(self, claims: list[tuple[str, str]], lease_until: datetime) -> None:
        self._write(*(("UPDATE messages SET alive_until = ? WHERE user = ? AND key = ? "
                       "AND reply IS NULL", [lease_until.timestamp(), user, key])
                      for user, key in claims))

    async def complete_message(self, external_id: str, key: str, reply: JsonDict) -> None:
        self._write(("UPDATE messages SET reply = ? WHERE user = ? AND key = ?",
                     [_json(reply), external_id, key]))

    async def release_message(self, external_id: str, key: str) -> None:
        self._write(("DELETE FROM messages WHERE user = ? AND key = ? AND reply IS NULL",
                     [external_id, key]))

    # -- one message of a user at a time ------------------------------------------------

    async def enqueue(self, external_id: str, lease_until: datetime) -> tuple[int, bool]:
        busy, (place,) = self._write(
            ("SELECT EXISTS (SELECT 1 FROM turn_queue WHERE user = ? AND done = 0)",
             [external_id]),
            ("INSERT INTO turn_queue (user, place, done, alive_until) VALUES (?, (SELECT "
             "COALESCE(MAX(place), -1) + 1 FROM turn_queue WHERE user = ?), 0, ?) "
             "RETURNING place", [external_id, external_id, lease_until.timestamp()]),
        )
        return place, not busy[0]

    async def first_in_line(self, external_id: str, place: int, now: datetime) -> bool:
        self._write((
            "UPDATE turn_queue SET done = 1 WHERE user = ? AND place < ? AND done = 0 "
            "AND alive_until < ?", [external_id, place, now.timestamp()]))
        row = self._one("SELECT 1 FROM turn_queue WHERE user = ? AND place < ? AND done = 0 "
                        "LIMIT 1", [external_id, place])
        return row is None

    async def renew_places(self, places: list[tuple[str, int]], lease_until: datetime) -> None:
        self._write(*(("UPDATE turn_queue SET alive_until = ? WHERE user = ? AND place = ? "
                       "AND done = 0", [lease_until.timestamp(), user, place])
                      for user, place in places))

    async def leave(self, external_id: str, place: int, *, served: bool = True) -> None:
        """Done places below the newest are deleted: the newest keeps the count going.
        (``served`` is not needed here: the line is read with one query.)"""
        self._write(
            ("UPDATE turn_queue SET done = 1 WHERE user = ? AND place = ?", [external_id, place]),
            ("DELETE FROM turn_queue WHERE user = ? AND done = 1 AND place < (SELECT MAX(place) "
             "FROM turn_queue WHERE user = ?)", [external_id, external_id]),
        )

    async def delete_user(self, external_id: str) -> bool:
        user = "(SELECT id FROM users WHERE external_id = ?)"
        rows = self._write(
            ("DELETE FROM messages WHERE user = ?", [external_id]),
            ("DELETE FROM turn_queue WHERE user = ?", [external_id]),
            (f"DELETE FROM utterances WHERE dialog_id IN (SELECT id FROM dialogs WHERE "
             f"human_id = {user})", [external_id]),
            (f"DELETE FROM dialogs WHERE human_id = {user}", [external_id]),
            ("DELETE FROM users WHERE external_id = ? RETURNING id", [external_id]),
        )
        # Out of the write-ahead log into the (securely overwritten) database file.
        self._one("PRAGMA wal_checkpoint(TRUNCATE)")
        return rows[-1] is not None

    async def ping(self) -> None:
        try:
            self._one("SELECT 1")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite store: {exc}") from exc

    async def close(self) -> None:
        self._db.close()
