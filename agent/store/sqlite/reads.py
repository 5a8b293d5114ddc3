"""The dialogs for reading on SQLite: whole dialogs, their ids by page, and which dialog holds
an utterance."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from agent.state.models import Dialog, Human
from agent.store.base import DialogHead
from agent.store.sqlite.base import SqliteBase, chunks, utterance_of


class SqliteReads(SqliteBase):
    """:class:`agent.store.reader.DialogReader` on SQLite."""

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

    async def stored_dialog_ids(self, dialog_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in chunks(list(dict.fromkeys(dialog_ids))):
            marks = ", ".join("?" * len(chunk))
            rows = await self.fetch_all(f"SELECT id FROM dialogs WHERE id IN ({marks})", chunk)
            found.update(str(row[0]) for row in rows)
        return found

    async def utterance_dialogs(self, utt_ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for chunk in chunks(list(dict.fromkeys(utt_ids))):
            marks = ", ".join("?" * len(chunk))
            rows = await self.fetch_all(
                f"SELECT utt_id, dialog_id FROM utterances WHERE utt_id IN ({marks})", chunk
            )
            found.update((str(row[0]), str(row[1])) for row in rows)
        return found
