"""The users' queues on MongoDB: a ticket lock in the user's document (see :class:`MongoQueues`)."""

from __future__ import annotations

from datetime import datetime

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from agent.state.models import utc_now
from agent.store.base import Place, RunningTurn
from agent.store.mongo.base import MongoBase
from agent.store.mongo.documents import human_id_for, new_user_doc
from agent.store.mongo.errors import Doc, unavailable_when_unreachable

#: Tries at taking a place for a user created at that very moment by another message.
_ATTEMPTS = 3
#: Places one look at the queue may pass over (given up, or their agent died); more are
#: passed over at the next look.
_PASSED_PER_LOOK = 64


class MongoQueues(MongoBase):
    """:class:`agent.store.QueueStore` on MongoDB.

    The queue is a ticket lock in the user's document, ``line``: ``taken`` counts the places
    ever taken (``$inc``, atomic), ``done`` is the place being served (every place below it
    is finished), ``alive_until`` the lease of that place, ``gave_up`` the places whose
    message stopped waiting, and ``free`` says nobody is in the queue. So:

    * **Taking a place when the queue is free** is one ``findAndModify`` that matches
      ``free: true``, counts the place and sets its lease, and returns the user's whole
      document: the turn needs no other read of the user (the place carries it,
      :attr:`Place.seen`, and :meth:`open_turn` takes it from there).
      Otherwise the place is counted without the condition and the message waits.
    * **Leaving** raises ``done`` (only if it is still this place: a place given up for a
      lapsed lease must not move the queue back) and grants the next place a lease, and
      sets ``free`` when nobody took a place since. These are statements of the same
      ``update`` command that writes the finished turn's attributes.
    * **Waiting** reads the document: the place is first when ``done`` reaches it. A place
      that gave up, or whose lease ran out (its agent died), is passed over with a
      compare-and-set on ``done``, so only one waiter moves the queue.

    ``interrupt`` names the place a later message asked to cancel; it counts only while
    that place is being served (``done``), so it never needs clearing. The utterance a
    running turn answers is not written on the queue (a turn's commands stay five: see
    docs/storage.md): :meth:`running_turn` finds it in the open dialog instead, as the
    newest human utterance past the dialog's stored count (the turn's end raises it).

    Every write is a single-document update, atomic on MongoDB; FerretDB 1.x is atomic
    only as built by ``tools/ferretdb`` (see docs/deployment.md).
    """

    @unavailable_when_unreachable
    async def take_place(self, user_id: str, lease_until: datetime) -> Place:
        lease = lease_until - utc_now()
        human_id = human_id_for(user_id)
        doc = await self._users.find_one_and_update(
            {"_id": human_id, "line.free": True},
            {
                "$inc": {"line.taken": 1},
                "$set": {"line.free": False, "line.alive_until": lease_until},
            },
            return_document=ReturnDocument.AFTER,
        )
        if doc is not None:
            number = int(doc["line"]["taken"]) - 1
            if int(doc["line"].get("done", 0)) == number:
                return Place(user_id, number, True, lease, seen=doc)
            # Not reached since places are counted with ``free: false`` (_count_place); a
            # queue left free by an older agent behind a counted place waits its turn.
            return Place(user_id, number, False, lease)
        doc = await self._count_place(user_id, human_id, lease_until)
        number = int(doc["line"]["taken"]) - 1
        place = Place(user_id, number, False, lease)
        if int(doc["line"].get("done", 0)) == number:  # first, but the lease is not ours yet
            place.first = await self._hold(human_id, number, lease_until)
            if place.first:
                place.seen = doc
        return place

    async def _count_place(self, user_id: str, human_id: str, lease_until: datetime) -> Doc:
        """Count a place without waiting for a free queue, creating the user if needed.

        The count also marks the queue busy (``free: false``), in the same write: the
        turn before may have freed the queue after this message found it busy, and
        between this count and :meth:`_hold` a message taking the free queue's fast path
        would otherwise be seated first beside this one (two turns of one user at once,
        reading the same attributes)."""
        new_user = new_user_doc(user_id)
        del new_user["_id"]
        new_user["line.alive_until"] = lease_until
        # $max: a new user's document gets line.done = 0; another keeps its count.
        update = {
            "$inc": {"line.taken": 1},
            "$max": {"line.done": 0},
            "$set": {"line.free": False},
            "$setOnInsert": new_user,
        }
        for _ in range(_ATTEMPTS):
            try:
                doc = await self._users.find_one_and_update(
                    {"_id": human_id}, update, upsert=True, return_document=ReturnDocument.AFTER
                )
            except DuplicateKeyError:  # created by a racing first message: count again
                continue
            if doc is not None:
                return doc
        raise RuntimeError(f"could not take a place in queue for user {user_id!r}")

    async def _hold(self, human_id: str, number: int, lease_until: datetime) -> bool:
        """Put this place's lease on the queue, if the queue is still at this place."""
        held = await self._users.update_one(
            {"_id": human_id, "line.done": number},
            {"$set": {"line.alive_until": lease_until, "line.free": False}},
        )
        return held.matched_count > 0

    @unavailable_when_unreachable
    async def first_in_queue(self, place: Place, now: datetime) -> bool:
        human_id = human_id_for(place.user_id)
        for _ in range(_PASSED_PER_LOOK):
            doc = await self._users.find_one({"_id": human_id})
            line: Doc = (doc or {}).get("line", {})
            served = int(line.get("done", 0))
            if served == place.number:
                if await self._hold(human_id, place.number, now + place.lease):
                    assert doc is not None
                    place.seen = doc
                    return True
                continue
            if served > place.number:  # passed over: its lease lapsed while it waited
                return False
            alive_until = line.get("alive_until")
            if (
                str(served) not in line.get("gave_up", {})
                and alive_until is not None
                and alive_until >= now
            ):
                return False
            # The place being served gave up or its agent died: move the queue past it.
            await self._users.update_one(
                {"_id": human_id, "line.done": served}, _moving_past(served, now + place.lease)
            )
        return False

    @unavailable_when_unreachable
    async def renew_places(self, places: list[tuple[str, int]], lease_until: datetime) -> None:
        for user_id, number in places:  # only the place being served holds a lease
            await self._users.update_one(
                {"_id": human_id_for(user_id), "line.done": number},
                {"$set": {"line.alive_until": lease_until}},
            )

    @unavailable_when_unreachable
    async def leave(self, place: Place, *, served: bool = True) -> None:
        if place.left:
            return
        await self._update_users(leaving(place, served, utc_now()))
        place.left = True

    async def note_turn(self, place: Place, utt_id: str) -> None:
        """Nothing to write: :meth:`running_turn` reads the utterance from the dialog."""

    @unavailable_when_unreachable
    async def running_turn(self, user_id: str) -> RunningTurn | None:
        doc = await self._users.find_one(
            {"_id": human_id_for(user_id)}, {"line": 1, "dialog.id": 1, "dialog.count": 1}
        )
        line: Doc = (doc or {}).get("line", {})
        if not line or line.get("free", True):
            return None
        served = int(line.get("done", 0))
        alive_until = line.get("alive_until")
        if str(served) in line.get("gave_up", {}) or alive_until is None or alive_until < utc_now():
            return None  # nobody is answering it: the next look at the queue passes it over
        dialog: Doc = (doc or {}).get("dialog") or {}
        if "id" not in dialog:
            return RunningTurn(served, None)
        newest = await self._utterances.find_one(
            {
                "dialog_id": dialog["id"],
                "seq": {"$gte": int(dialog.get("count", 0))},
                "speaker": "human",
            },
            {"_id": 1},
            sort=[("seq", -1)],
        )
        return RunningTurn(served, None if newest is None else str(newest["_id"]))

    @unavailable_when_unreachable
    async def interrupt(self, user_id: str, number: int) -> None:
        await self._users.update_one(
            {"_id": human_id_for(user_id), "line.done": number},
            {"$set": {"line.interrupt": number}},
        )

    @unavailable_when_unreachable
    async def interrupted(self, places: list[tuple[str, int]]) -> list[tuple[str, int]]:
        if not places:
            return []
        users = {human_id_for(user): (user, number) for user, number in places}
        cursor = self._users.find({"_id": {"$in": list(users)}}, {"line": 1})
        found = []
        async for doc in cursor:
            user, number = users[doc["_id"]]
            line = doc.get("line", {})
            if line.get("interrupt") == number and int(line.get("done", -1)) == number:
                found.append((user, number))
        return found


def _moving_past(number: int, lease_until: datetime) -> Doc:
    """The update that moves the queue past place ``number`` (the caller's query checks the
    queue is still at it) and grants the next place a lease until ``lease_until``."""
    return {
        "$set": {"line.done": number + 1, "line.alive_until": lease_until},
        "$unset": {f"line.gave_up.{number}": ""},
    }


def leaving(place: Place, served: bool, now: datetime) -> list[Doc]:
    """The ``update`` statements that take ``place`` out of its user's queue."""
    human_id = human_id_for(place.user_id)
    number, gave_up = place.number, f"line.gave_up.{place.number}"
    statements: list[Doc] = []
    if not served:  # still waiting: whoever reaches this place passes it over
        statements.append({"q": {"_id": human_id}, "u": {"$set": {gave_up: True}}})
    statements += [
        {"q": {"_id": human_id, "line.done": number}, "u": _moving_past(number, now + place.lease)},
        {
            "q": {"_id": human_id, "line.done": number + 1, "line.taken": number + 1},
            "u": {"$set": {"line.free": True}},
        },
    ]
    return statements


def finishing(place: Place, now: datetime, query: Doc, update: Doc) -> list[Doc]:
    """``update`` of the user's document (matching ``query``) and leaving ``place``, as
    one write: two ``update`` statements that each move the queue past the place, so only
    the first that matches runs. Nobody took a place since: the queue is free again;
    somebody did: it is not. Neither matches when ``query`` does not, or when the place
    was passed over (its lease ran out): the caller then goes the long way, the turn's own
    statements and :func:`leaving`, which hold in every case."""
    number = place.number
    past = _moving_past(number, now + place.lease)
    unset = {**update.get("$unset", {}), **past["$unset"]}

    def statement(nobody_behind: bool) -> Doc:
        condition = {"line.taken": number + 1} if nobody_behind else {}
        changes = {
            **update.get("$set", {}),
            **past["$set"],
            **({"line.free": True} if nobody_behind else {}),
        }
        return {
            "q": {**query, "line.done": number, **condition},
            "u": {**update, "$set": changes, "$unset": unset},
        }

    return [statement(True), statement(False)]
