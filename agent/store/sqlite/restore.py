"""Restoring users and dialogs from a backup on SQLite (``chorus import``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from agent.state.models import Dialog, Human, new_id
from agent.store.base import Restored, StoreWriteRefused, restored_head
from agent.store.sqlite.base import SqliteBase, Statement, document_text


class SqliteRestore(SqliteBase):
    """The restoring half of :class:`agent.store.DialogStore` on SQLite: whole records
    with their ids, and what an import checks before it writes."""

    async def restore_user(self, human: Human) -> bool:
        user_id = human.user_external_id
        if await self.fetch_one("SELECT 1 FROM users WHERE user_id = ?", [user_id]) is not None:
            return False
        taken = await self.fetch_one("SELECT 1 FROM users WHERE id = ?", [human.id]) is not None
        stored = human.model_copy(update={"id": new_id()}) if taken else human
        (row,) = await self.write(
            (
                "INSERT OR IGNORE INTO users (id, user_id, doc) VALUES (?, ?, ?) RETURNING id",
                [stored.id, user_id, document_text(stored)],
            )
        )
        return row is not None

    async def stored_dialog_ids(self, dialog_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _chunks(list(dict.fromkeys(dialog_ids))):
            marks = ", ".join("?" * len(chunk))
            rows = await self.fetch_all(f"SELECT id FROM dialogs WHERE id IN ({marks})", chunk)
            found.update(str(row[0]) for row in rows)
        return found

    async def utterance_dialogs(self, utt_ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for chunk in _chunks(list(dict.fromkeys(utt_ids))):
            marks = ", ".join("?" * len(chunk))
            rows = await self.fetch_all(
                f"SELECT utt_id, dialog_id FROM utterances WHERE utt_id IN ({marks})", chunk
            )
            found.update((str(row[0]), str(row[1])) for row in rows)
        return found

    async def restore_dialog(self, user_id: str, dialog: Dialog, active: bool) -> Restored:
        if (
            await self.fetch_one("SELECT 1 FROM dialogs WHERE id = ?", [dialog.dialog_id])
            is not None
        ):
            return Restored.PRESENT
        human = await self.user(user_id)
        stays_open = active and (
            await self.fetch_one(
                "SELECT 1 FROM dialogs WHERE human_id = ? AND active = 1", [human.id]
            )
            is None
        )
        head = restored_head(dialog, human.id, closed=active and not stays_open)
        statements: list[Statement] = [
            (
                "INSERT INTO dialogs (id, human_id, active, doc) VALUES (?, ?, ?, ?)",
                [head.dialog_id, human.id, int(stays_open), document_text(head)],
            )
        ]
        statements += [
            (
                "INSERT INTO utterances (dialog_id, seq, utt_id, speaker, doc) "
                "VALUES (?, ?, ?, ?, ?)",
                [dialog.dialog_id, seq, u.utt_id, u.speaker, document_text(u)],
            )
            for seq, u in enumerate(dialog.utterances)
        ]
        try:
            await self.write(*statements)
        except sqlite3.IntegrityError as exc:  # one transaction: nothing of it is stored
            raise StoreWriteRefused(
                f"dialog {dialog.dialog_id}: an utterance id is stored in another dialog, "
                f"or is in this one twice ({exc})"
            ) from None
        return Restored.STORED_CLOSED if active and not stays_open else Restored.STORED


#: Ids looked up per query (SQLite binds at most 32,766 parameters).
_CHUNK = 500


def _chunks(ids: list[str]) -> list[list[str]]:
    return [ids[start : start + _CHUNK] for start in range(0, len(ids), _CHUNK)]
