"""The users' line on MongoDB, built from inserts only (see :class:`MongoLines`)."""

from __future__ import annotations

from datetime import datetime

from pymongo.errors import DuplicateKeyError, WriteError

from agent.store.mongo.base import MongoBase
from agent.store.mongo.codec import _literal
from agent.store.mongo.errors import Doc, _unavailable_when_unreachable

#: When a served place leaves, the place this far below it is deleted: the line keeps a
#: few documents per user, yet a message would have to read a stale newest place across
#: that many whole turns of the same user to take a number twice.
_QUEUE_KEPT = 8
#: Users whose last served place this process remembers (one number each).
_SERVED_KEPT = 65536


class MongoLines(MongoBase):
    """:class:`agent.store.LineStore` on MongoDB."""

    # -- one message of a user at a time ------------------------------------------------
    #
    # A place is a document whose ``_id`` holds (user, place): taking one is an insert,
    # which the unique ``_id`` makes atomic on MongoDB and on FerretDB alike (no ``$inc``,
    # which FerretDB 1.x cannot make atomic across connections, i.e. across replicas).
    # Every read and write names one ``_id`` (FerretDB scans the collection for any other
    # filter: 95 ms per turn at 3,000 places):
    #
    # * The user's ``next`` document says where to try first. It is raised when a place
    #   leaves, in the same ``update`` command that marks the place done, so it is never
    #   ahead of the newest place and numbers have no gaps; when it is behind (a message
    #   still running or waiting, an agent that died), the insert finds the number taken
    #   and tries the next one.
    # * A place is done when its turn ran (``served``) or when it was given up (its
    #   message stopped waiting, or its lease ran out). A served place started only when
    #   every earlier place was done, so whether all earlier places are done is read
    #   downwards from the place just below, stopping at the first served (or deleted)
    #   one: usually a single read, and none when this process served the place just
    #   below and saw it leave (a user's messages mostly reach the same replica).
    # * A served place deletes the place ``_QUEUE_KEPT`` below it, which is done for the
    #   same reason.

    @staticmethod
    def _place_id(external_id: str, place: int) -> str:
        return f"{len(_literal(external_id))}:{external_id}:{place}"

    @staticmethod
    def _next_place_id(external_id: str) -> str:
        return f"{len(_literal(external_id))}:{external_id}:next"

    @_unavailable_when_unreachable
    async def enqueue(self, external_id: str, lease_until: datetime) -> tuple[int, bool]:
        next_id = self._next_place_id(external_id)
        hint = await self._queue.find_one({"_id": next_id})
        place = 0 if hint is None else int(hint["place"])
        while True:
            try:
                await self._queue.insert_one({
                    "_id": self._place_id(external_id, place), "user": external_id,
                    "place": place, "done": False, "served": False,
                    "alive_until": lease_until})
                break
            except DuplicateKeyError:  # taken by another message of the user
                place += 1
        if self._served.get(external_id) == place - 1:
            # This process served the place just below and saw it leave: every earlier
            # place is done, no need to read it.
            return place, True
        return place, await self._earlier_done(external_id, place, None)

    async def _earlier_done(self, external_id: str, place: int, now: datetime | None) -> bool:
        """Whether every place below ``place`` is done; with ``now``, places whose lease
        ran out before it are given up on the way."""
        for earlier in range(place - 1, -1, -1):
            doc = await self._queue.find_one({"_id": self._place_id(external_id, earlier)})
            if doc is None or doc.get("served"):
                return True
            if doc["done"]:
                continue
            if now is None or doc["alive_until"] >= now:
                return False
            await self._queue.update_one({"_id": doc["_id"]}, {"$set": {"done": True}})
        return True

    @_unavailable_when_unreachable
    async def first_in_line(self, external_id: str, place: int, now: datetime) -> bool:
        return await self._earlier_done(external_id, place, now)

    @_unavailable_when_unreachable
    async def renew_places(self, places: list[tuple[str, int]], lease_until: datetime) -> None:
        # A done place may be renewed too: harmless, a lease only matters while not done.
        update = {"$set": {"alive_until": lease_until}}
        ids = [self._place_id(user, place) for user, place in places]
        if self._point_reads:
            for place_id in ids:
                await self._queue.update_one({"_id": place_id}, update)
        else:
            await self._queue.update_many({"_id": {"$in": ids}}, update)

    @_unavailable_when_unreachable
    async def leave(self, external_id: str, place: int, *, served: bool = True) -> None:
        # The place and where to take the next one, in one command: the hint is raised
        # only now, so it never names a place that is not there yet.
        done: Doc = {"q": {"_id": self._place_id(external_id, place)},
                     "u": {"$set": {"done": True, "served": served}}}
        hint = {"$max": {"place": place + 1}}
        next_id = self._next_place_id(external_id)
        _, errors = await self._update(self._queue, [done, {
            "q": {"_id": next_id}, "u": {**hint, "$setOnInsert": {"user": external_id}},
            "upsert": True}])
        if errors:
            if [e.get("index") for e in errors] != [1] or errors[0].get("code") != 11000:
                raise WriteError(str(errors), code=errors[0].get("code"))
            # Two first places upserted the hint at once: the other won.
            await self._queue.update_one({"_id": next_id}, hint)
        if served:
            if len(self._served) >= _SERVED_KEPT:
                self._served.clear()
            self._served[external_id] = place
        elif self._served.get(external_id) == place - 1:
            self._served.pop(external_id, None)
        if served and place >= _QUEUE_KEPT:
            await self._queue.delete_one(
                {"_id": self._place_id(external_id, place - _QUEUE_KEPT)})
