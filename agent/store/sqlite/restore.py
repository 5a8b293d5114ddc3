"""Restoring users and dialogs from a backup on SQLite (``chorus import``)."""

from __future__ import annotations

import sqlite3

from agent.state.models import Dialog, Human, new_id
from agent.store.base import Restored, StoreWriteRefused, restored_head
from agent.store.sqlite.base import SqliteBase, Statement, document_text


class SqliteRestore(SqliteBase):
    """:class:`agent.store.base.RestoreStore` on SQLite: whole records with their ids."""

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
