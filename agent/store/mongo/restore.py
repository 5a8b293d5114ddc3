"""Dialogs and users read from a backup, stored as the turn would have stored them
(``chorus import``; see :meth:`agent.store.base.RestoreStore.restore_dialog`).

Without transactions (FerretDB has none) a restore is several writes, ordered so that one
cut short is finished by running it again: the user first, then the utterances (each
upserted by its ``_id``, which is its id in the backup, and the dialog's id: an utterance
of another dialog with that ``_id`` is never matched, so the upsert fails on the duplicate
key instead of overwriting it), then the open dialog's part of the user's document, and
the dialog's own document last, which is what marks the dialog stored."""

from __future__ import annotations

import contextlib

from pymongo.errors import DuplicateKeyError

from agent.state.models import Dialog, Human
from agent.store.base import Restored, StoreWriteRefused, restored_head
from agent.store.mongo.base import MongoBase
from agent.store.mongo.codec import escape, literal
from agent.store.mongo.documents import (
    dialog_doc,
    human_id_for,
    new_user_doc,
    open_dialog_state,
    utterance_doc,
)
from agent.store.mongo.errors import Doc, unavailable_when_unreachable

#: Utterances upserted per ``update`` command.
_BATCH = 100
#: MongoDB's error code for a duplicate key.
_DUPLICATE_KEY = 11000


class MongoRestore(MongoBase):
    """:class:`agent.store.base.RestoreStore` on MongoDB."""

    @unavailable_when_unreachable
    async def restore_user(self, human: Human) -> bool:
        doc: Doc = escape(human.model_dump())
        doc.pop("id")
        doc["_id"] = human_id_for(human.user_external_id)
        try:
            await self._users.insert_one(doc)
        except DuplicateKeyError:  # stored already: the stored user is kept
            return False
        return True

    @unavailable_when_unreachable
    async def restore_dialog(self, user_id: str, dialog: Dialog, active: bool) -> Restored:
        dialog_id = literal(dialog.dialog_id)
        if await self._dialogs.find_one({"_id": dialog_id}, projection={"_id": 1}) is not None:
            return Restored.PRESENT
        ids = [literal(u.utt_id) for u in dialog.utterances]
        if len(set(ids)) < len(ids):
            raise StoreWriteRefused(f"dialog {dialog_id}: an utterance id is in it twice")
        human_id = human_id_for(user_id)
        with contextlib.suppress(DuplicateKeyError):
            await self._users.insert_one(new_user_doc(user_id))
        count = len(dialog.utterances)
        for start in range(0, count, _BATCH):
            statements = [
                {
                    # The dialog's id too: another dialog's utterance is never matched.
                    "q": {"_id": literal(u.utt_id), "dialog_id": dialog_id},
                    "u": utterance_doc(dialog_id, seq, u),
                    "upsert": True,
                }
                for seq, u in enumerate(dialog.utterances[start : start + _BATCH], start)
            ]
            _, errors = await self._update(self._utterances, statements)
            if errors:
                await self._forget(dialog_id, ids)
                if all(e.get("code") == _DUPLICATE_KEY for e in errors):
                    raise StoreWriteRefused(
                        f"dialog {dialog_id}: an utterance id is stored in another dialog"
                    )
                raise StoreWriteRefused(f"dialog {dialog_id}: utterances not stored: {errors[0]}")
        stays_open = False
        if active:
            head = restored_head(dialog, human_id, closed=False)
            state = open_dialog_state(head)
            state["count"] = count
            opened = await self._users.update_one(
                {
                    "_id": human_id,
                    "$or": [{"dialog": {"$exists": False}}, {"dialog.id": dialog_id}],
                },
                {"$set": {"dialog": state}},
            )
            stays_open = opened.matched_count > 0
        head = restored_head(dialog, human_id, closed=active and not stays_open)
        doc = dialog_doc(head, count=count, active=stays_open)
        try:
            await self._dialogs.insert_one(doc)
        except DuplicateKeyError:  # restored at the same time by another import
            return Restored.PRESENT
        return Restored.STORED_CLOSED if active and not stays_open else Restored.STORED

    async def _forget(self, dialog_id: str, ids: list[str]) -> None:
        """Delete what a refused restore wrote of the dialog: its document is not written,
        so nothing reads these utterances, and they would only hold their ids."""
        for start in range(0, len(ids), _BATCH):
            await self._utterances.delete_many(
                {"_id": {"$in": ids[start : start + _BATCH]}, "dialog_id": dialog_id}
            )
