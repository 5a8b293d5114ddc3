"""The dialogs for reading on MongoDB (:class:`agent.store.reader.DialogReader`): whole
dialogs, a group at a time, dialog ids by page, and which dialog holds an utterance."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from pymongo import ASCENDING

from agent.state.models import Dialog
from agent.store.base import DialogHead
from agent.store.mongo.base import MongoBase, MongoDb
from agent.store.mongo.codec import literal
from agent.store.mongo.documents import (
    HELD_BY_THE_USER,
    head_of,
    human_id_for,
    human_of,
    open_head_of,
    utterance_from,
    utterance_id,
)
from agent.store.mongo.errors import Doc, unavailable_when_unreachable
from agent.store.mongo.numbering import Numbering
from agent.store.mongo.ratings import with_ratings

#: Dialogs read whole by ``_id`` (point reads) on FerretDB when no longer than this.
_POINT_READ_DIALOG = 200


class MongoReads(MongoBase):
    """Dialogs for reading: while a dialog is open, what changes lives with its user."""

    def __init__(self, m: MongoDb, numbering: Numbering) -> None:
        super().__init__(m)
        self._numbering = numbering

    def _as_read(self, doc: Doc, user: Doc) -> DialogHead:
        """A dialog's head for reading: while it is open, what changes lives with the user."""
        head = head_of(doc)
        open_head = open_head_of(user)
        if open_head is not None and open_head.dialog_id == head.dialog_id:
            held = {field: getattr(open_head, field) for field in HELD_BY_THE_USER}
            head = head.model_copy(update=held)
        return with_ratings(head, doc)

    async def _with_utterances(self, heads: list[Doc], users: dict[str, Doc]) -> list[Dialog]:
        """Whole dialogs (each head's user in ``users``, by ``_id``): all their utterances
        in one indexed query, grouped in order. On FerretDB, a short dialog is read by
        ``_id`` instead (it scans every utterance of every dialog for the query)."""
        by_dialog: dict[str, list[Doc]] = {}
        if self._point_reads:
            for head in heads:
                user = users[head["human_id"]]
                docs = await self._by_number(head["_id"], self._count(head, user))
                if docs is not None:
                    by_dialog[head["_id"]] = docs
        rest = [head["_id"] for head in heads if head["_id"] not in by_dialog]
        if rest:
            by_dialog.update({i: [] for i in rest})
            cursor = self._utterances.find(
                {"dialog_id": {"$in": rest}}, sort=[("dialog_id", ASCENDING), ("seq", ASCENDING)]
            )
            async for doc in cursor:
                by_dialog[doc["dialog_id"]].append(doc)
        dialogs = []
        for doc in heads:
            user = users[doc["human_id"]]
            read = self._as_read(doc, user)
            utterances = [utterance_from(u) for u in by_dialog[read.dialog_id]]
            dialogs.append(
                Dialog(
                    **read.model_dump(exclude={"human_id"}),
                    human=human_of(user),
                    utterances=utterances,
                )
            )
        return dialogs

    @staticmethod
    def _count(head: Doc, user: Doc) -> int:
        state = user.get("dialog")
        if isinstance(state, dict) and state.get("id") == head["_id"]:
            return int(state.get("count", 0))
        return int(head.get("utterance_count", 0))

    async def _by_number(self, dialog_id: str, count: int) -> list[Doc] | None:
        """Every utterance of a short dialog, read by ``_id`` (plus any stored past the
        count by an unfinished turn); None when the ids do not name them all (a longer
        dialog, or one restored from a backup, whose utterances keep their ids)."""
        if count > _POINT_READ_DIALOG:
            return None
        docs = sorted(
            await self._numbering.numbered(dialog_id, range(count)), key=lambda doc: int(doc["seq"])
        )
        if [doc["seq"] for doc in docs] != list(range(count)):
            return None
        while (
            extra := await self._utterances.find_one(
                {"_id": utterance_id(dialog_id, count), "dialog_id": dialog_id}
            )
        ) is not None:
            docs.append(extra)
            count += 1
        return docs

    @unavailable_when_unreachable
    async def dialog(self, dialog_id: str) -> Dialog | None:
        head = await self._dialogs.find_one({"_id": literal(dialog_id)})
        if head is None:
            return None
        user = await self._users.find_one({"_id": head["human_id"]})
        if user is None:
            return None
        (dialog,) = await self._with_utterances([head], {user["_id"]: user})
        return dialog

    @unavailable_when_unreachable
    async def dialogs(self, dialog_ids: Sequence[str]) -> list[Dialog]:
        """Three queries whatever the number: the heads and their users by ``_id``, and
        every utterance of them by ``dialog_id`` (on FerretDB, one scan of the utterances
        for the group instead of one per dialog)."""
        ids = [literal(i) for i in dict.fromkeys(dialog_ids)]
        if not ids:
            return []
        found = {doc["_id"]: doc async for doc in self._dialogs.find({"_id": {"$in": ids}})}
        owners = list({doc["human_id"] for doc in found.values()})
        users = {doc["_id"]: doc async for doc in self._users.find({"_id": {"$in": owners}})}
        heads = [found[i] for i in ids if i in found and found[i]["human_id"] in users]
        return await self._with_utterances(heads, users) if heads else []

    @unavailable_when_unreachable
    async def user_dialogs(self, user_id: str) -> list[Dialog] | None:
        user = await self._users.find_one({"_id": human_id_for(user_id)})
        if user is None:
            return None
        cursor = self._dialogs.find(
            {"human_id": user["_id"]}, sort=[("date_start", ASCENDING), ("opened_ns", ASCENDING)]
        )
        heads = await cursor.to_list()
        return await self._with_utterances(heads, {user["_id"]: user}) if heads else []

    @unavailable_when_unreachable
    async def list_dialog_ids(self, offset: int, limit: int, active: bool | None) -> list[str]:
        cursor = self._dialogs.find(
            {} if active is None else {"active": active},
            projection={"_id": 1},
            sort=[("date_start", ASCENDING), ("opened_ns", ASCENDING)],
            skip=offset,
            limit=limit,
        )
        return [str(doc["_id"]) async for doc in cursor]

    @unavailable_when_unreachable
    async def dialog_by_dp_agent_id(self, object_id: str) -> str | None:
        doc = await self._dialogs.find_one(
            {"dp_agent_id": literal(object_id)}, projection={"_id": 1}
        )
        return None if doc is None else str(doc["_id"])

    @unavailable_when_unreachable
    async def dialog_starts(self, prefix: str) -> dict[str, datetime]:
        cursor = self._dialogs.find(
            {"_id": {"$gte": literal(prefix), "$lt": prefix + "\U0010ffff"}},
            projection={"date_start": 1},
            limit=10,
        )
        return {str(doc["_id"]): _aware(doc["date_start"]) async for doc in cursor}

    @unavailable_when_unreachable
    async def stored_dialog_ids(self, dialog_ids: Sequence[str]) -> set[str]:
        return {str(doc["_id"]) for doc in await self._by_id(self._dialogs, dialog_ids)}

    @unavailable_when_unreachable
    async def utterance_dialogs(self, utt_ids: Sequence[str]) -> dict[str, str]:
        docs = await self._by_id(self._utterances, utt_ids)
        return {str(doc["_id"]): str(doc.get("dialog_id")) for doc in docs}


def _aware(moment: datetime) -> datetime:
    """A date as stored (PyMongo reads BSON dates naive unless told): aware UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
