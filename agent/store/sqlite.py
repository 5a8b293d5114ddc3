"""The embedded store: one SQLite file, so ``make run`` needs no database server.

Records are JSON documents in three tables (users, dialogs, utterances), one row per
utterance. Queries run directly on the event loop: each takes microseconds (WAL, no fsync
per commit), and handing them to a thread, as aiosqlite does, cost more than half the
agent's CPU per turn in the profile. No method awaits inside a transaction, so turns on one
loop cannot interleave their writes; between processes sharing the file, SQLite's own
locking (``BEGIN IMMEDIATE``) serialises them. Attribute merges are single ``json_set``
statements, so concurrent merges of different keys never lose each other.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

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
from agent.store.base import DialogHead, JsonDict, StoreUnavailable

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
    user TEXT NOT NULL, key TEXT NOT NULL, reply TEXT, PRIMARY KEY (user, key));
CREATE TABLE IF NOT EXISTS turn_queue (
    user TEXT NOT NULL, place INTEGER NOT NULL, done INTEGER NOT NULL, alive_until REAL NOT NULL,
    PRIMARY KEY (user, place));
CREATE TABLE IF NOT EXISTS utterances (
    dialog_id TEXT NOT NULL, seq INTEGER NOT NULL, utt_id TEXT NOT NULL UNIQUE,
    speaker TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (dialog_id, seq));
"""
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


def _merge(prefix: str, updates: dict[str, Any]) -> tuple[str, list[str]]:
    """``json_set(doc, '$.attributes."k"', json(?), ...)``: keys were checked at the
    boundary (no quote, no dot), so each becomes one quoted path element."""
    parts, args = [], []
    for key, value in updates.items():
        parts.append(f"'{prefix}.\"{key}\"', json(?)")
        args.append(json.dumps(value))
    return f"json_set(doc, {', '.join(parts)})", args


def _insert_utterance(dialog_id: str, utterance: HumanUtterance | BotUtterance) -> Statement:
    return (_INSERT_UTTERANCE, [dialog_id, dialog_id, utterance.utt_id, utterance.speaker,
                                utterance.model_dump_json()])


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
        db.executescript(_SCHEMA)
        return cls(db)

    def _one(self, sql: str, args: Iterable[Any] = ()) -> Any:
        return self._db.execute(sql, tuple(args)).fetchone()

    def _all(self, sql: str, args: Iterable[Any] = ()) -> list[Any]:
        return self._db.execute(sql, tuple(args)).fetchall()

    def _write(self, *statements: Statement) -> list[Any]:
        """Statements in one transaction; the first row each returned (or None)."""
        rows = []
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for sql, args in statements:
                rows.append(self._db.execute(sql, args).fetchone())
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
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
             [utterance.model_dump_json(), utterance.utt_id]),
            _insert_utterance(dialog_id, bot_utterance),
        ]
        if replace_human_attributes:
            statements.append(("UPDATE users SET doc = json_set(doc, '$.attributes', json(?)) "
                               "WHERE id = ?", [json.dumps(human_attributes), human_id]))
        elif human_attributes:
            merged, args = _merge("$.attributes", human_attributes)
            statements.append((f"UPDATE users SET doc = {merged} WHERE id = ?",
                               [*args, human_id]))
        if human_profile:
            merged, args = _merge("$.profile", human_profile)
            statements.append((f"UPDATE users SET doc = {merged} WHERE id = ?",
                               [*args, human_id]))
        if bot_attributes:
            merged, args = _merge("$.bot.attributes", bot_attributes)
            statements.append((f"UPDATE dialogs SET doc = {merged} WHERE id = ?",
                               [*args, dialog_id]))
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

    async def claim_message(self, external_id: str, key: str) -> tuple[bool, JsonDict | None]:
        (claimed,) = self._write((
            "INSERT INTO messages (user, key) VALUES (?, ?) ON CONFLICT DO NOTHING "
            "RETURNING key", [external_id, key]))
        if claimed is not None:
            return True, None
        row = self._one("SELECT reply FROM messages WHERE user = ? AND key = ?",
                        [external_id, key])
        return False, None if row is None or row[0] is None else json.loads(row[0])

    async def complete_message(self, external_id: str, key: str, reply: JsonDict) -> None:
        self._write(("UPDATE messages SET reply = ? WHERE user = ? AND key = ?",
                     [json.dumps(reply), external_id, key]))

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
        return rows[-1] is not None

    async def ping(self) -> None:
        try:
            self._one("SELECT 1")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"SQLite store: {exc}") from exc

    async def close(self) -> None:
        self._db.close()
