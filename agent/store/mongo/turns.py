"""A turn's start on MongoDB: the user's document (the open dialog's state lives in it), the
dialog opened when none is, and the window (see :mod:`agent.store.mongo`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from pymongo import DESCENDING
from pymongo.errors import DuplicateKeyError

from agent.state.models import Bot, HumanUtterance, Utterance, new_id, utc_now
from agent.store.base import DialogHead, Place, TurnEnd, TurnStart
from agent.store.mongo.base import MongoBase, MongoDb
from agent.store.mongo.codec import literal
from agent.store.mongo.documents import (
    closing_update,
    dialog_doc,
    human_id_for,
    human_of,
    new_user_doc,
    open_dialog_state,
    open_head_of,
    utterance_from,
)
from agent.store.mongo.errors import Doc, unavailable_when_unreachable
from agent.store.mongo.numbering import Numbering
from agent.store.mongo.turn_end import MongoTurnEnd, complete_end


class MongoTurns(MongoBase):
    """:class:`agent.store.base.TurnStore` on MongoDB: the turn's reads and its human
    utterance, and closing the open dialog, here; its end in :mod:`.turn_end`."""

    def __init__(self, m: MongoDb, numbering: Numbering) -> None:
        super().__init__(m)
        self._numbering = numbering
        self._end = MongoTurnEnd(m, numbering)

    async def finish_turn(self, end: TurnEnd, *, retrying: bool = False) -> None:
        await self._end.finish_turn(end, retrying=retrying)

    async def _user_doc(self, user_id: str) -> Doc:
        """The user's document, created on first contact."""
        human_id = human_id_for(user_id)
        doc = await self._users.find_one({"_id": human_id})
        if doc is None:
            # DuplicateKeyError: another message created the user first
            with contextlib.suppress(DuplicateKeyError):
                await self._users.insert_one(new_user_doc(user_id))
            doc = await self._users.find_one({"_id": human_id})
            if doc is None:  # pragma: no cover - erased while being created
                raise LookupError(f"user {user_id!r} vanished while being created")
        return doc

    async def _open_dialog(
        self, user: Doc, channel_type: str, arm: str | None = None
    ) -> tuple[DialogHead, int]:
        """The user's open dialog and its utterance count, opening one (on experiment arm
        ``arm``) when none is."""
        head = open_head_of(user)
        if head is not None:
            count = int(user["dialog"].get("count", 0))
            if count == 0:  # opened by a turn that has not ended: its document may be missing
                await self._store_head(head)
            return head, count
        human_id = str(user["_id"])
        head = DialogHead(
            dialog_id=new_id(),
            channel_type=channel_type,
            date_start=utc_now(),
            human_id=human_id,
            bot=Bot(),
            arm=arm,
        )
        opened = await self._users.update_one(
            {"_id": human_id, "dialog": {"$exists": False}},
            {"$set": {"dialog": open_dialog_state(head)}},
        )
        if not opened.matched_count:  # another message opened one first: use theirs
            raced = open_head_of(await self._users.find_one({"_id": human_id}) or {})
            if raced is not None:
                await self._store_head(raced)
                return raced, 0
            return await self._open_dialog({"_id": human_id}, channel_type, arm)
        await self._store_head(head)
        return head, 0

    async def _store_head(self, head: DialogHead) -> None:
        """The dialog's own document, written once whoever writes it. The user's document
        names the dialog first (so two messages cannot open two dialogs), and the
        database may go away before this second write: the turn fails, and the client's
        retry, finding the dialog open and never counted, writes it then. Without it the
        dialog's utterances would be stored and the dialog never listed."""
        doc = dialog_doc(head)
        await self._dialogs.update_one({"_id": doc.pop("_id")}, {"$setOnInsert": doc}, upsert=True)

    @unavailable_when_unreachable
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
        """The user's document as taking the place in the queue returned it (``seen``, no
        read), else read; then the window, by ids computed from the dialog's utterance count. A last
        turn whose answer is stored but whose end on the user's document is not is
        completed first (:func:`~agent.store.mongo.documents.turn_end_of`)."""
        user = dict(seen) if seen is not None else await self._user_doc(user_id)
        head, count = await self._open_dialog(user, channel_type, arm)
        docs = await self._numbering.window(head.dialog_id, count, limit, whole=whole)
        answer = next((d for d in docs if d["seq"] == count + 1 and d["speaker"] == "bot"), None)
        if answer is not None:
            completed = await complete_end(
                self._users, self._utterances, user, head.dialog_id, count, answer
            )
            if completed is None:  # taken back by its turn: its number is free again
                docs = [d for d in docs if d is not answer]
                self._numbering.keep(head.dialog_id, count + 1)
                answer = None
            else:
                user = completed
                head, _ = await self._open_dialog(user, channel_type)
        history = [utterance_from(doc) for doc in docs[-limit:]] if limit > 0 else []
        return TurnStart(human_of(user), head, history, completed_last_turn=answer is not None)

    @unavailable_when_unreachable
    async def utterances(self, utt_ids: Sequence[str]) -> list[Utterance]:
        found = {doc["_id"]: doc for doc in await self._numbering.by_ids(list(utt_ids))}
        return [utterance_from(found[i]) for i in utt_ids if i in found]

    @unavailable_when_unreachable
    async def keyed_turn(self, dialog_id: str, key: str) -> list[Utterance]:
        human = await self._utterances.find_one(
            {"dialog_id": literal(dialog_id), "message_key": literal(key)}
        )
        if human is None:
            return []
        after = await self._utterances.find_one(
            {"dialog_id": dialog_id, "seq": int(human["seq"]) + 1}
        )
        return [utterance_from(doc) for doc in (human, after) if doc is not None]

    @unavailable_when_unreachable
    async def last_closed_dialog(self, user_id: str) -> str | None:
        """(A dialog whose document says closed while the user's still names it is half
        closed, and not counted: the close was cut short, and closing it again ends it.)"""
        human_id = human_id_for(user_id)
        user = await self._users.find_one({"_id": human_id}, projection={"dialog.id": 1})
        head = (user or {}).get("dialog")
        still_open = head.get("id") if isinstance(head, dict) else None
        doc = await self._dialogs.find_one(
            {"human_id": human_id, "active": False, "_id": {"$ne": still_open}},
            projection={"_id": 1},
            sort=[("date_finish", DESCENDING)],
        )
        return None if doc is None else str(doc["_id"])

    @unavailable_when_unreachable
    async def add_utterance(
        self, dialog_id: str, utterance: HumanUtterance, place: Place | None = None
    ) -> None:
        """(``place`` needs no write here: its running turn is read from the dialog.)"""
        await self._numbering.insert(dialog_id, utterance)

    @unavailable_when_unreachable
    async def mark_interrupted(self, utt_id: str) -> None:
        await self._utterances.update_one(
            {"_id": literal(utt_id), "speaker": "human"}, {"$set": {"interrupted": True}}
        )

    @unavailable_when_unreachable
    async def close_active_dialog(self, user_id: str) -> str | None:
        user = await self._users.find_one({"_id": human_id_for(user_id)})
        head = None if user is None else open_head_of(user)
        if user is None or head is None:
            return None
        count = int(user["dialog"].get("count", 0))
        # The dialog's document first: a close cut short leaves the dialog open, and
        # closing it again finishes the job.
        await self._dialogs.update_one(
            {"_id": head.dialog_id}, closing_update(head, count, utc_now()), upsert=True
        )
        released = await self._users.update_one(
            {"_id": user["_id"], "dialog.id": head.dialog_id}, {"$unset": {"dialog": ""}}
        )
        return head.dialog_id if released.modified_count else None
