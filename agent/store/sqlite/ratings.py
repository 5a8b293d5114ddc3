"""Ratings on SQLite: a dialog's and a bot answer's, each one conditional ``UPDATE``."""

from __future__ import annotations

from typing import Any

from agent.store.base import RatingsFull
from agent.store.sqlite.base import SqliteBase, json_text


class SqliteRatings(SqliteBase):
    """:class:`agent.store.base.RatingStore` on SQLite."""

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
