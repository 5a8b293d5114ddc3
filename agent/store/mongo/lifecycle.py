"""The data lifecycle on MongoDB: the same sweep as SQLite's, by ``_id`` order.

Each rule walks its collection by ``_id`` from where its previous pass stopped, ``batch``
documents at a time, and starts over after the last. A TTL index does not fit these rules:
it deletes the documents of one collection by a date they hold, while a closed dialog is
deleted whole (its utterances have no date of the dialog's closing, and would be left
behind), closing an idle dialog is a write to two documents, and compaction is an update.
So the sweep applies them, on MongoDB and FerretDB alike (FerretDB 1.x has no TTL indexes
anyway); idempotency keys keep their TTL index (:mod:`agent.store.mongo.keys`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agent.store.base import Swept
from agent.store.compaction import compacted
from agent.store.mongo.base import MongoBase, MongoDb
from agent.store.mongo.documents import closing_update, open_head_of, utterance_id
from agent.store.mongo.errors import Doc, unavailable_when_unreachable

#: Collections whose documents ``sizes`` counts.
_COLLECTIONS = ("users", "dialogs", "utterances", "idempotency_keys")
#: What compaction rewrites of an utterance (the rest stays as it is).
_BULKY = ("annotations", "hypotheses", "trace", "errors", "skill_selection")


def _aware(moment: Any) -> datetime | None:
    if not isinstance(moment, datetime):
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class MongoLifecycle(MongoBase):
    """:class:`agent.store.base.LifecycleStore` on MongoDB."""

    def __init__(self, m: MongoDb) -> None:
        super().__init__(m)
        #: rule → the ``_id`` its walk stopped after (None: start over)
        self._cursors: dict[str, Any] = {}

    async def _next(
        self, rule: str, collection: Any, query: Doc, batch: int, projection: Doc | None = None
    ) -> tuple[list[Doc], bool]:
        """The next ``batch`` documents of the rule's walk; whether the walk ended. The
        walk filters on nothing but ``_id`` (the rule filters in Python), so a pass reads
        ``batch`` index entries however few match: a filter on another field would have
        the server skip over every document that does not match to fill the batch."""
        after = self._cursors.get(rule)
        if after is not None:
            query = {**query, "_id": {"$gt": after}}
        docs = await collection.find(
            query, projection=projection, sort=[("_id", 1)], limit=batch
        ).to_list()
        ended = len(docs) < batch
        self._cursors[rule] = None if ended else docs[-1]["_id"]
        return docs, ended

    async def _busy(self, human_ids: list[str]) -> set[str]:
        """Users with a message in the queue (``line.free`` false): a turn in flight."""
        docs = await self._users.find(
            {"_id": {"$in": human_ids}}, projection={"line.free": 1}
        ).to_list()
        return {doc["_id"] for doc in docs if (doc.get("line") or {}).get("free", True) is False}

    @unavailable_when_unreachable
    async def delete_closed(self, before: datetime, batch: int, swept: Swept) -> bool:
        """Delete dialogs closed before ``before``: their utterances first (at most
        ``batch`` a pass), the dialog once none is left, so an erasure cut short is
        finished by a later pass and no utterance outlives its dialog. The utterances of
        all the pass's dialogs are found by one query (FerretDB answers it by reading every
        utterance stored, so one query per dialog cost a pass that many reads of the whole
        collection), in the walk's order and one more than the pass may delete: the dialog
        that one belongs to is taken up again by the next pass."""
        docs, ended = await self._next(
            "closed",
            self._dialogs,
            {},
            batch,
            projection={"date_finish": 1, "human_id": 1, "active": 1},
        )
        expired = [
            d
            for d in docs
            if d.get("active") is False and (_aware(d.get("date_finish")) or before) < before
        ]
        busy = await self._busy([d["human_id"] for d in expired]) if expired else set()
        expired = [d for d in expired if d["human_id"] not in busy]
        if not expired:
            return ended
        found = await self._utterances.find(
            {"dialog_id": {"$in": [d["_id"] for d in expired]}},
            projection={"_id": 1, "dialog_id": 1},
            sort=[("dialog_id", 1), ("seq", 1)],
            limit=batch + 1,
        ).to_list()
        held: dict[str, list[str]] = {}
        for utterance in found[:batch]:
            held.setdefault(utterance["dialog_id"], []).append(utterance["_id"])
        # The dialog whose utterances go past the pass's share: listed in part, and the
        # last this pass reaches (the ones after it in the walk are not listed at all).
        cut = found[batch]["dialog_id"] if len(found) > batch else None
        for doc in expired:  # in ``_id`` order, as the utterances were sorted
            ids = held.get(doc["_id"], [])
            if ids:
                deleted = await self._utterances.delete_many({"_id": {"$in": ids}})
                swept.utterances_deleted += deleted.deleted_count
            if doc["_id"] == cut:  # the rest next pass
                self._cursors["closed"] = _before(doc["_id"])
                return False
            gone = await self._dialogs.delete_one({"_id": doc["_id"], "active": False})
            swept.dialogs_deleted += gone.deleted_count
            if gone.deleted_count:  # its handoff, if it had one, goes with it
                await self._db["handoffs"].delete_one({"_id": doc["_id"]})
        return ended

    @unavailable_when_unreachable
    async def close_idle(self, before: datetime, now: datetime, batch: int, swept: Swept) -> bool:
        """Close open dialogs whose last utterance (or start) is older than ``before``,
        unless their user has a message in the queue, as ``close_active_dialog`` closes one."""
        users, ended = await self._next(
            "idle",
            self._users,
            {},
            batch,
            projection={"dialog": 1, "line": 1},
        )
        users = [u for u in users if isinstance(u.get("dialog"), dict)]
        last_ids = {
            utterance_id(u["dialog"]["id"], int(u["dialog"].get("count", 0)) - 1): u
            for u in users
            if int(u["dialog"].get("count", 0)) > 0
        }
        found = (
            await self._utterances.find(
                {"_id": {"$in": list(last_ids)}}, projection={"date_time": 1}
            ).to_list()
            if last_ids
            else []
        )
        latest = {doc["_id"]: _aware(doc.get("date_time")) for doc in found}
        for user in users:
            head = open_head_of(user)
            if head is None or (user.get("line") or {}).get("free", True) is False:
                continue
            count = int(user["dialog"].get("count", 0))
            last = latest.get(utterance_id(head.dialog_id, count - 1)) if count else None
            if (last or _aware(head.date_start) or now) >= before:
                continue
            if await self._close_if_still(user, head.dialog_id, count, now):
                swept.dialogs_closed += 1
        return ended

    async def _close_if_still(self, user: Doc, dialog_id: str, count: int, now: datetime) -> bool:
        """Close the dialog if it is still open with ``count`` utterances and nobody in
        queue; the dialog's document first (as ``close_active_dialog`` does), put back
        open if a message came meanwhile and the dialog is still the user's open one."""
        head = open_head_of(user)
        assert head is not None
        written = await self._dialogs.update_one(
            {"_id": dialog_id, "active": True}, closing_update(head, count, now)
        )  # no upsert: a dialog erased meanwhile stays erased
        if not written.matched_count:
            return False
        released = await self._users.update_one(
            {
                "_id": user["_id"],
                "dialog.id": dialog_id,
                "dialog.count": count,
                "line.free": {"$ne": False},
            },
            {"$unset": {"dialog": ""}},
        )
        if released.modified_count:
            return True
        still = await self._users.find_one(
            {"_id": user["_id"], "dialog.id": dialog_id}, projection={"_id": 1}
        )
        if still is None:  # closed by its user, or erased, meanwhile: theirs stands
            return False
        await self._dialogs.update_one(
            {"_id": dialog_id},
            {"$set": {"active": True, "date_finish": None}},
        )
        return False

    @unavailable_when_unreachable
    async def compact(self, before: datetime, batch: int, swept: Swept) -> bool:
        """Compact answered turns older than ``before`` (an unanswered human utterance is
        a turn in flight, left alone)."""
        walked, ended = await self._next(
            "compact",
            self._utterances,
            {},
            batch,
            projection={"date_time": 1},
        )
        old = [d["_id"] for d in walked if (_aware(d.get("date_time")) or before) < before]
        docs = (
            await self._utterances.find({"_id": {"$in": old}}, sort=[("_id", 1)]).to_list()
            if old
            else []
        )
        answers = (
            {
                doc["_id"]: doc
                for doc in await self._utterances.find(
                    {
                        "_id": {
                            "$in": [
                                utterance_id(d["dialog_id"], int(d["seq"]) + 1)
                                for d in docs
                                if d.get("speaker") == "human" and "seq" in d
                            ]
                        }
                    },
                    projection={"active_skill": 1, "speaker": 1},
                ).to_list()
            }
            if docs
            else {}
        )
        for doc in docs:
            skill = None
            if doc.get("speaker") == "human":
                answer = answers.get(utterance_id(doc["dialog_id"], int(doc.get("seq", -2)) + 1))
                if answer is None or answer.get("speaker") != "bot":
                    continue
                skill = answer.get("active_skill")
            smaller = compacted(doc, skill)
            if smaller is None:
                continue
            changes = {key: smaller[key] for key in _BULKY if key in smaller}
            result = await self._utterances.update_one({"_id": doc["_id"]}, {"$set": changes})
            swept.utterances_compacted += result.modified_count
        return ended

    @unavailable_when_unreachable
    async def sizes(self) -> dict[str, int]:
        return {name: await self._db[name].count_documents({}) for name in _COLLECTIONS}


def _before(dialog_id: str) -> str | None:
    """A cursor just before ``dialog_id``, so the next pass takes it up again."""
    return dialog_id[:-1] + chr(ord(dialog_id[-1]) - 1) + "\U0010ffff" if dialog_id else None
