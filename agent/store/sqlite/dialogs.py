"""The dialogs on SQLite: the turn and the read API."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from agent.state.models import (
    Bot,
    Dialog,
    Human,
    HumanUtterance,
    Utterance,
    new_id,
    utc_now,
)
from agent.store.base import (
    DialogHead,
    RatingsFull,
    TurnEnd,
    TurnStart,
)
from agent.store.sqlite.base import (
    SqliteBase,
    Statement,
    document_text,
    insert_utterance,
    json_text,
    leaving,
    merge_statements,
    utterance_of,
)


class SqliteDialogs(SqliteBase):
    """:class:`agent.store.DialogStore` on SQLite, but for erasure and the connection."""

    async def open_turn(
        self,
        user_id: str,
        channel_type: str,
        limit: int,
        arm: str | None = None,
        *,
        seen: Mapping[str, Any] | None = None,
    ) -> TurnStart:
        """(``seen`` is not needed here: reading the user again costs no round trip.)"""
        human = await self.user(user_id)
        dialog = await self._active_dialog(human, channel_type, arm)
        return TurnStart(human, dialog, await self._recent_utterances(dialog.dialog_id, limit))

    async def _active_dialog(
        self, human: Human, channel_type: str, arm: str | None = None
    ) -> DialogHead:
        """The user's open dialog, or a new one (on experiment arm ``arm``)."""
        row = await self.fetch_one(
            "SELECT doc FROM dialogs WHERE human_id = ? AND active = 1", [human.id]
        )
        if row is not None:
            return DialogHead.model_validate_json(row[0])
        head = DialogHead(
            dialog_id=new_id(),
            channel_type=channel_type,
            date_start=utc_now(),
            human_id=human.id,
            bot=Bot(),
            arm=arm,
        )
        try:
            await self.write(
                (
                    "INSERT INTO dialogs (id, human_id, active, doc) VALUES (?, ?, 1, ?)",
                    [head.dialog_id, human.id, head.model_dump_json()],
                )
            )
        except sqlite3.IntegrityError:  # another process opened it first: use theirs
            row = await self.fetch_one(
                "SELECT doc FROM dialogs WHERE human_id = ? AND active = 1", [human.id]
            )
            return DialogHead.model_validate_json(row[0])
        return head

    async def _recent_utterances(self, dialog_id: str, limit: int) -> list[Utterance]:
        """The dialog's last ``limit`` utterances, oldest first."""
        rows = await self.fetch_all(
            "SELECT doc FROM utterances WHERE dialog_id = ? ORDER BY seq DESC LIMIT ?",
            [dialog_id, limit],
        )
        return [utterance_of.validate_json(row[0]) for row in reversed(rows)]

    async def keyed_turn(self, dialog_id: str, key: str) -> list[Utterance]:
        rows = await self.fetch_all(
            "SELECT doc FROM utterances WHERE dialog_id = ? AND seq >= (SELECT seq FROM "
            "utterances WHERE dialog_id = ? AND speaker = 'human' "
            "AND json_extract(doc, '$.message_key') = ? LIMIT 1) ORDER BY seq LIMIT 2",
            [dialog_id, dialog_id, key],
        )
        return [utterance_of.validate_json(row[0]) for row in rows]

    async def add_utterance(self, dialog_id: str, utterance: HumanUtterance) -> None:
        await self.write(insert_utterance(dialog_id, utterance))

    async def mark_interrupted(self, utt_id: str) -> None:
        await self.write(
            (
                "UPDATE utterances SET doc = json_set(doc, '$.interrupted', json('true')) "
                "WHERE utt_id = ? AND speaker = 'human'",
                [utt_id],
            )
        )

    async def finish_turn(self, end: TurnEnd, *, retrying: bool = False) -> None:
        # One transaction: an earlier call stored all of the turn's end, or nothing.
        place = end.leave
        if retrying and await self.fetch_one(
            "SELECT 1 FROM utterances WHERE utt_id = ?", [end.answer.utt_id]
        ):
            if place is not None:
                place.left = True
            return
        human_id = end.human_id
        statements: list[Statement] = [
            (
                "UPDATE utterances SET doc = ? WHERE utt_id = ?",
                [document_text(end.utterance), end.utterance.utt_id],
            ),
            insert_utterance(end.dialog_id, end.answer),
        ]
        if end.replace_human_attributes:
            statements.append(
                (
                    "UPDATE users SET doc = json_set(doc, '$.attributes', json(?)) WHERE id = ?",
                    [json_text(end.human_attributes), human_id],
                )
            )
        else:
            statements += merge_statements("users", ("attributes",), end.human_attributes, human_id)
        statements += merge_statements("users", ("profile",), end.human_profile or {}, human_id)
        statements += merge_statements(
            "dialogs", ("bot", "attributes"), end.bot_attributes, end.dialog_id
        )
        if place is not None:
            statements += leaving(place)
        await self.write(*statements)
        if place is not None:
            place.left = True

    async def close_active_dialog(self, user_id: str) -> str | None:
        (row,) = await self.write(
            (
                "UPDATE dialogs SET active = 0, doc = json_set(doc, '$.date_finish', ?) "
                "WHERE active = 1 AND human_id = (SELECT id FROM users WHERE user_id = ?) "
                "RETURNING id",
                [utc_now().isoformat(), user_id],
            )
        )
        return None if row is None else str(row[0])

    async def _dialog(self, head_doc: str, human: Human) -> Dialog:
        head = DialogHead.model_validate_json(head_doc)
        rows = await self.fetch_all(
            "SELECT doc FROM utterances WHERE dialog_id = ? ORDER BY seq", [head.dialog_id]
        )
        return Dialog(
            **head.model_dump(exclude={"human_id"}),
            human=human,
            utterances=[utterance_of.validate_json(row[0]) for row in rows],
        )

    async def dialog(self, dialog_id: str) -> Dialog | None:
        row = await self.fetch_one(
            "SELECT d.doc, u.doc FROM dialogs d JOIN users u ON u.id = d.human_id WHERE d.id = ?",
            [dialog_id],
        )
        if row is None:
            return None
        return await self._dialog(row[0], Human.model_validate_json(row[1]))

    async def dialogs(self, dialog_ids: Sequence[str]) -> list[Dialog]:
        """One dialog at a time: each is an indexed read, and reading a group at once would
        hold the event loop for the whole group (see :mod:`agent.store.sqlite`)."""
        found = []
        for dialog_id in dict.fromkeys(dialog_ids):
            dialog = await self.dialog(dialog_id)
            if dialog is not None:
                found.append(dialog)
        return found

    async def user_dialogs(self, user_id: str) -> list[Dialog] | None:
        user = await self.fetch_one("SELECT id, doc FROM users WHERE user_id = ?", [user_id])
        if user is None:
            return None
        human = Human.model_validate_json(user[1])
        rows = await self.fetch_all(
            "SELECT doc FROM dialogs WHERE human_id = ? ORDER BY rowid", [user[0]]
        )  # creation order: dates tie within a ms
        return [await self._dialog(row[0], human) for row in rows]

    async def list_dialog_ids(self, offset: int, limit: int, active: bool | None) -> list[str]:
        where, args = ("", []) if active is None else ("WHERE active = ? ", [int(active)])
        rows = await self.fetch_all(
            f"SELECT id FROM dialogs {where}ORDER BY rowid LIMIT ? OFFSET ?",
            [*args, limit, offset],
        )
        return [str(row[0]) for row in rows]

    async def dialog_by_dp_agent_id(self, object_id: str) -> str | None:
        row = await self.fetch_one(
            "SELECT id FROM dialogs WHERE json_extract(doc, '$.dp_agent_id') = ?", [object_id]
        )
        return None if row is None else str(row[0])

    async def dialog_starts(self, prefix: str) -> dict[str, datetime]:
        # A range on the primary key (LIKE would scan: it ignores case).
        rows = await self.fetch_all(
            "SELECT doc FROM dialogs WHERE id >= ? AND id < ? ORDER BY id LIMIT 10",
            [prefix, prefix + "\U0010ffff"],
        )
        heads = [DialogHead.model_validate_json(row[0]) for row in rows]
        return {head.dialog_id: head.date_start for head in heads}

    async def add_dialog_rating(
        self,
        dialog_id: str,
        entry: dict[str, Any],
        user_id: str | None = None,
        rating: float | None = None,
        max_ratings: int | None = None,
    ) -> bool:
        owned, args = _owned_by("human_id", user_id)
        number, number_args = _numeric(rating)
        room, room_args = _room(max_ratings)
        (row,) = await self.write(
            (
                f"UPDATE dialogs SET doc = json_set(doc, '$.attributes.ratings', "
                f"{_APPENDED}{number}) WHERE id = ?{owned}{room} RETURNING id",
                [json_text(entry), *number_args, dialog_id, *args, *room_args],
            )
        )
        if (
            row is None
            and max_ratings is not None
            and await self.fetch_one(
                f"SELECT 1 FROM dialogs WHERE id = ?{owned}", [dialog_id, *args]
            )
        ):
            raise RatingsFull(f"dialog {dialog_id!r}", max_ratings)
        return row is not None

    async def add_utterance_rating(
        self,
        utt_id: str,
        entry: dict[str, Any] | None,
        user_id: str | None = None,
        rating: float | None = None,
        max_ratings: int | None = None,
    ) -> bool:
        if entry is None and rating is None:
            raise ValueError("a rating needs an entry or a numeric rating")
        owned, args = (
            ("", [])
            if user_id is None
            else (
                " AND dialog_id IN (SELECT d.id FROM dialogs d JOIN users u ON u.id = d.human_id "
                "WHERE u.user_id = ?)",
                [user_id],
            )
        )
        number, number_args = _numeric(rating)
        room, room_args = _room(max_ratings)
        set_args: list[Any]
        if entry is None:  # the numeric rating alone
            setting, set_args = "json_set(doc, '$.rating', ?)", [rating]
        else:
            setting = f"json_set(doc, '$.attributes.ratings', {_APPENDED}{number})"
            set_args = [json_text(entry), *number_args]
        (row,) = await self.write(
            (
                f"UPDATE utterances SET doc = {setting} WHERE utt_id = ? AND speaker = 'bot'"
                f"{owned}{room} RETURNING utt_id",
                [*set_args, utt_id, *args, *room_args],
            )
        )
        if (
            row is None
            and max_ratings is not None
            and await self.fetch_one(
                f"SELECT 1 FROM utterances WHERE utt_id = ? AND speaker = 'bot'{owned}",
                [utt_id, *args],
            )
        ):
            raise RatingsFull(f"bot utterance {utt_id!r}", max_ratings)
        return row is not None


def _numeric(rating: float | None) -> tuple[str, list[Any]]:
    """The ``json_set`` arguments that set Chorus's numeric rating too, when there is one."""
    return ("", []) if rating is None else (", '$.rating', ?", [rating])


def _room(max_ratings: int | None) -> tuple[str, list[Any]]:
    """The condition that the row's ``attributes.ratings`` has room for one more (a value
    that is not a list counts as one)."""
    if max_ratings is None:
        return "", []
    return (
        " AND (CASE coalesce(json_type(doc, '$.attributes.ratings'), 'null') "
        "WHEN 'array' THEN json_array_length(doc, '$.attributes.ratings') "
        "WHEN 'null' THEN 0 ELSE 1 END) < ?",
        [max_ratings],
    )


def _owned_by(column: str, user_id: str | None) -> tuple[str, list[Any]]:
    """The condition that the row's user (``column``) is the one with ``user_id``."""
    if user_id is None:
        return "", []
    return f" AND {column} = (SELECT id FROM users WHERE user_id = ?)", [user_id]


#: ``attributes.ratings`` with one more item (the bound JSON): a list grows; a value a
#: service left there that is not a list becomes the list's first item, so nothing is lost.
_APPENDED = (
    "json_insert(CASE WHEN json_type(doc, '$.attributes.ratings') = 'array' "
    "THEN json_extract(doc, '$.attributes.ratings') "
    "WHEN json_type(doc, '$.attributes.ratings') IN ('null') "
    "OR json_type(doc, '$.attributes.ratings') IS NULL THEN json_array() "
    "ELSE json_array(json_extract(doc, '$.attributes.ratings')) END, '$[#]', json(?))"
)
