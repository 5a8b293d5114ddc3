"""The turn on SQLite: its start, its human utterance, its end, and closing the dialog."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from agent.state.models import (
    NOT_SHOWN,
    Bot,
    Human,
    HumanUtterance,
    Utterance,
    new_id,
    utc_now,
)
from agent.store.base import (
    DialogHead,
    Place,
    PlaceLost,
    TurnEnd,
    TurnStart,
    overtaken,
)
from agent.store.sqlite.base import (
    SqliteBase,
    Statement,
    document_text,
    insert_utterance,
    json_text,
    leaving,
    left_behind,
    merge_statements,
    note,
    utterance_of,
)

#: A dialog's last utterances, newest first: whole, or as shown (the fields no service is shown
#: of a past utterance taken out by SQLite's JSON, before Python parses any of it).
_RECENT = "SELECT {} FROM utterances WHERE dialog_id = ? ORDER BY seq DESC LIMIT ?"
RECENT_WHOLE = _RECENT.format("doc")
RECENT_AS_SHOWN = _RECENT.format(
    "json_remove(doc, {})".format(", ".join(f"'$.{name}'" for name in NOT_SHOWN))
)
#: A user and their open dialog, if any (one index lookup each): what a turn reads first.
_USER_AND_DIALOG = (
    "SELECT users.doc, dialogs.doc FROM users LEFT JOIN dialogs ON dialogs.human_id = "
    "users.id AND dialogs.active = 1 WHERE users.user_id = ?"
)


class SqliteTurns(SqliteBase):
    """:class:`agent.store.base.TurnStore` on SQLite."""

    async def open_turn(
        self,
        user_id: str,
        channel_type: str,
        limit: int,
        arm: str | None = None,
        *,
        seen: Mapping[str, Any] | None = None,
        whole: bool = True,
    ) -> TurnStart:
        """(``seen`` is not needed here: reading the user again costs no round trip.) The
        user and the open dialog are read in one statement; a new user or dialog is made
        as :meth:`user` and :meth:`_active_dialog` make them."""
        row = await self.fetch_one(_USER_AND_DIALOG, [user_id])
        if row is None:
            human = await self.user(user_id)
        else:
            human = Human.model_validate_json(row[0])
        if row is not None and row[1] is not None:
            dialog = DialogHead.model_validate_json(row[1])
        else:
            dialog = await self._active_dialog(human, channel_type, arm)
        history = await self._recent_utterances(dialog.dialog_id, limit, whole)
        return TurnStart(human, dialog, history)

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

    async def _recent_utterances(self, dialog_id: str, limit: int, whole: bool) -> list[Utterance]:
        """The dialog's last ``limit`` utterances, oldest first (``whole``: see
        :meth:`open_turn`)."""
        rows = await self.fetch_all(RECENT_WHOLE if whole else RECENT_AS_SHOWN, [dialog_id, limit])
        return [utterance_of.validate_json(row[0]) for row in reversed(rows)]

    async def utterances(self, utt_ids: Sequence[str]) -> list[Utterance]:
        if not utt_ids:
            return []
        marks = ", ".join("?" * len(utt_ids))
        rows = await self.fetch_all(
            f"SELECT utt_id, doc FROM utterances WHERE utt_id IN ({marks})", list(utt_ids)
        )
        found = {row[0]: row[1] for row in rows}
        return [utterance_of.validate_json(found[i]) for i in utt_ids if i in found]

    async def keyed_turn(self, dialog_id: str, key: str) -> list[Utterance]:
        rows = await self.fetch_all(
            "SELECT doc FROM utterances WHERE dialog_id = ? AND seq >= (SELECT seq FROM "
            "utterances WHERE dialog_id = ? AND speaker = 'human' "
            "AND json_extract(doc, '$.message_key') = ? LIMIT 1) ORDER BY seq LIMIT 2",
            [dialog_id, dialog_id, key],
        )
        return [utterance_of.validate_json(row[0]) for row in rows]

    async def last_closed_dialog(self, user_id: str) -> str | None:
        row = await self.fetch_one(
            "SELECT id FROM dialogs WHERE active = 0 AND human_id = (SELECT id FROM users "
            "WHERE user_id = ?) ORDER BY json_extract(doc, '$.date_finish') DESC LIMIT 1",
            [user_id],
        )
        return None if row is None else str(row[0])

    async def add_utterance(
        self, dialog_id: str, utterance: HumanUtterance, place: Place | None = None
    ) -> None:
        noted = [] if place is None else [note(place, utterance.utt_id)]
        await self.write(insert_utterance(dialog_id, utterance), *noted)

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
        fence = end.held
        if fence is None:
            await self.write(*statements)
            return
        # Fenced: stored only while the place is still served, in the same transaction.
        # A turn that leaves its place marks it done in the fence itself (the rest of
        # leaving it follows); one that keeps it only looks.
        if place is not None:
            check: Statement = (
                "UPDATE lines SET done = 1 WHERE user_id = ? AND place = ? AND done = 0 "
                "RETURNING 1",
                [place.user_id, place.number],
            )
            then = [*statements, left_behind(place)]
        else:
            check = (
                "SELECT 1 FROM lines WHERE user_id = ? AND place = ? AND done = 0",
                [fence.user_id, fence.number],
            )
            then = statements
        held = await self.write_if(
            check,
            then,
            lambda: [
                (
                    "UPDATE utterances SET doc = ? WHERE utt_id = ? AND speaker = 'human'",
                    [document_text(overtaken(end.utterance)), end.utterance.utt_id],
                ),
                *leaving(fence),
            ],
        )
        if held and place is None:
            return
        fence.left = True
        if not held:
            raise PlaceLost(end.utterance.utt_id)

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
