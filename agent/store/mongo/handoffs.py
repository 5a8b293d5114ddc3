"""The dialogs' handoffs on MongoDB (:class:`agent.store.handoffs.HandoffStore`): one
document per dialog in ``handoffs``, ``_id`` the dialog's id.

Each change is one ``update_one`` whose filter holds the state it changes from and the
request's time (which a new request changes): of two agents writing at once, one matches
and the other does not. A request inserts the document, or, when the dialog's last
handoff is returned, replaces it under the same kind of filter.

An utterance appended outside a turn's end raises the user's ``dialog.count`` to past it
(``$max``), as a turn's end does, so the next turn's window (read by utterance numbers,
:mod:`.numbering`) starts after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError

from agent.state.handoff import Handoff, HandoffState, ReturnedBy
from agent.state.models import BotUtterance, HumanUtterance, Utterance
from agent.store.handoffs import claimed, returned
from agent.store.mongo.base import MongoBase, MongoDb
from agent.store.mongo.codec import escape, literal, unescape
from agent.store.mongo.documents import human_id_for, utterance_from
from agent.store.mongo.errors import Doc, unavailable_when_unreachable
from agent.store.mongo.numbering import Numbering


def _doc(handoff: Handoff) -> Doc:
    doc: Doc = escape(handoff.model_dump())
    doc["_id"] = doc["dialog_id"]
    return doc


def _handoff(doc: Doc | None) -> Handoff | None:
    if doc is None:
        return None
    doc = unescape(doc)
    doc.pop("_id", None)
    return Handoff.model_validate(doc)


class MongoHandoffs(MongoBase):
    """See the module docstring."""

    def __init__(self, m: MongoDb, numbering: Numbering) -> None:
        super().__init__(m)
        self._numbering = numbering
        self._handoffs = m.db["handoffs"]

    async def create_indexes(self) -> None:
        await self._handoffs.create_index(
            [("state", ASCENDING), ("requested_at", ASCENDING)], name="handoffs_by_state"
        )

    @unavailable_when_unreachable
    async def request_handoff(self, handoff: Handoff) -> Handoff | None:
        try:
            await self._handoffs.insert_one(_doc(handoff))
            return handoff
        except DuplicateKeyError:
            pass
        current = await self.handoff(handoff.dialog_id)
        if current is None or current.active:
            return None
        return await self._swap(current, handoff)

    async def _swap(self, before: Handoff, after: Handoff) -> Handoff | None:
        """``after`` in place of ``before``, unless the document changed since it was read."""
        done = await self._handoffs.replace_one(
            {
                "_id": literal(before.dialog_id),
                "state": before.state,
                "requested_at": before.requested_at,
            },
            _doc(after),
        )
        return after if done.matched_count else None

    @unavailable_when_unreachable
    async def claim_handoff(self, dialog_id: str, operator: str, now: datetime) -> Handoff | None:
        current = await self.handoff(dialog_id)
        held = claimed(current, operator, now) if current else None
        return await self._swap(current, held) if current and held else None

    @unavailable_when_unreachable
    async def return_handoff(
        self,
        dialog_id: str,
        by: ReturnedBy,
        now: datetime,
        *,
        states: Sequence[HandoffState] = ("waiting", "held"),
        operator: str | None = None,
        requested_before: datetime | None = None,
    ) -> Handoff | None:
        current = await self.handoff(dialog_id)
        back = returned(current, by, now, states, operator, requested_before) if current else None
        return await self._swap(current, back) if current and back else None

    @unavailable_when_unreachable
    async def handoff(self, dialog_id: str) -> Handoff | None:
        return _handoff(await self._handoffs.find_one({"_id": literal(dialog_id)}))

    @unavailable_when_unreachable
    async def handoffs(
        self,
        states: Sequence[HandoffState],
        *,
        limit: int,
        requested_before: datetime | None = None,
    ) -> list[Handoff]:
        found: list[Handoff] = []
        for state in ("waiting", "held", "returned"):  # the inbox's order
            if state not in states or len(found) >= limit:
                continue
            query: Doc = {"state": state}
            if requested_before is not None:
                query["requested_at"] = {"$lt": requested_before}
            cursor = self._handoffs.find(
                query, sort=[("requested_at", ASCENDING)], limit=limit - len(found)
            )
            found += [h for doc in await cursor.to_list() if (h := _handoff(doc)) is not None]
        return found

    @unavailable_when_unreachable
    async def append_utterance(
        self, dialog_id: str, user_id: str, utterance: HumanUtterance | BotUtterance
    ) -> None:
        seq = await self._numbering.insert(dialog_id, utterance)
        await self._users.update_one(
            {"_id": human_id_for(user_id), "dialog.id": literal(dialog_id)},
            {"$max": {"dialog.count": seq + 1}},
        )

    @unavailable_when_unreachable
    async def utterances_after(
        self, dialog_id: str, after: str | None, *, limit: int
    ) -> list[Utterance] | None:
        seq = -1
        if after is not None:
            doc = await self._utterances.find_one(
                {"_id": literal(after), "dialog_id": literal(dialog_id)}, projection={"seq": 1}
            )
            if doc is None:
                return None
            seq = int(doc["seq"])
        cursor = self._utterances.find(
            {"dialog_id": literal(dialog_id), "seq": {"$gt": seq}},
            sort=[("seq", ASCENDING)],
            limit=limit,
        )
        return [utterance_from(doc) for doc in await cursor.to_list()]
