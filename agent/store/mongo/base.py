"""What the three parts of the MongoDB store share: the database and its collections."""

from __future__ import annotations

from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from agent.store.mongo.errors import Doc


class MongoBase:
    """The collections the three parts of the store share."""

    def __init__(self, client: AsyncMongoClient[Doc], db: AsyncDatabase[Doc], *,
                 point_reads: bool = False) -> None:
        self._client = client
        self._db = db
        self._point_reads = point_reads
        self._users: AsyncCollection[Doc] = db["users"]
        self._dialogs: AsyncCollection[Doc] = db["dialogs"]
        self._utterances: AsyncCollection[Doc] = db["utterances"]
        self._messages: AsyncCollection[Doc] = db["messages"]
        self._queue: AsyncCollection[Doc] = db["turn_queue"]
        #: dialog id → the next utterance number, read by this turn (see _write_seq)
        self._next_seqs: dict[str, int] = {}
        #: user → the newest place of theirs this process served and saw leave
        self._served: dict[str, int] = {}

    async def _update(self, collection: AsyncCollection[Doc],
                      statements: list[Doc]) -> tuple[Doc, list[Doc]]:
        """Several update statements of one collection as one ordered ``update`` command,
        and the errors of those that failed (the ones after the first failure did not
        run). Sent as a command rather than with ``bulk_write``, which sends a document
        over 16 MB to FerretDB and then fails on its reply instead of refusing it."""
        reply = await self._db.command({"update": collection.name, "updates": statements,
                                        "ordered": True})
        return reply, list(reply.get("writeErrors") or [])
