"""What the parts of the MongoDB store share: the client, the database and its collections."""

from __future__ import annotations

from collections.abc import Sequence

from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import WriteError

from agent.store.mongo.codec import literal
from agent.store.mongo.errors import Doc
from agent.store.mongo.outage import Outage

#: Ids looked up per ``find`` (:meth:`MongoBase._by_id`).
_IDS_PER_FIND = 100


class MongoDb:
    """The client, the database and its collections, and what the server can do: what the
    parts of the store share (:class:`agent.store.mongo.MongoStore` holds one)."""

    def __init__(
        self,
        client: AsyncMongoClient[Doc],
        db: AsyncDatabase[Doc],
        *,
        point_reads: bool = False,
        bulk_write: bool = False,
    ) -> None:
        self.client = client
        self.db = db
        #: The server is a stock FerretDB: reads by ``_id``, one at a time
        self.point_reads = point_reads
        #: The server has MongoDB 8's client-level ``bulkWrite``: a turn's end, in two
        #: collections, is one command instead of two (turned off if the server says no)
        self.bulk_write = bulk_write
        self.users: AsyncCollection[Doc] = db["users"]
        self.dialogs: AsyncCollection[Doc] = db["dialogs"]
        self.utterances: AsyncCollection[Doc] = db["utterances"]
        self.keys: AsyncCollection[Doc] = db["idempotency_keys"]
        #: whether the server is away, for every part's calls to wait on
        self.outage = Outage(client)


class MongoBase:
    """A part of the store: the shared database under the names its methods use."""

    def __init__(self, m: MongoDb) -> None:
        self._m = m
        self._client = m.client
        self._db = m.db
        self._point_reads = m.point_reads
        self._users = m.users
        self._dialogs = m.dialogs
        self._utterances = m.utterances
        self._keys = m.keys
        self._outage = m.outage

    async def _update(
        self, collection: AsyncCollection[Doc], statements: list[Doc]
    ) -> tuple[Doc, list[Doc]]:
        """Several update statements of one collection as one ordered ``update`` command,
        and the errors of those that failed (the ones after the first failure did not
        run). Sent as a command rather than with ``bulk_write``, which sends a document
        over 16 MB to FerretDB and then fails on its reply instead of refusing it."""
        reply = await self._db.command(
            {"update": collection.name, "updates": statements, "ordered": True}
        )
        return reply, list(reply.get("writeErrors") or [])

    async def _update_users(self, statements: list[Doc]) -> Doc:
        """Statements on users' documents, in one command; any failure is raised. The
        reply tells how many statements matched (``n``)."""
        reply, errors = await self._update(self._users, statements)
        if errors:
            raise WriteError(str(errors), code=errors[0].get("code"))
        return reply

    async def _by_id(self, collection: AsyncCollection[Doc], ids: Sequence[str]) -> list[Doc]:
        """Documents by ``_id``: one ``$in`` per :data:`_IDS_PER_FIND` on MongoDB, point
        reads on FerretDB (which scans the whole collection for an ``$in``)."""
        wanted = [literal(i) for i in dict.fromkeys(ids)]
        if self._point_reads:
            found = [await collection.find_one({"_id": i}) for i in wanted]
            return [doc for doc in found if doc is not None]
        docs: list[Doc] = []
        for start in range(0, len(wanted), _IDS_PER_FIND):
            chunk = wanted[start : start + _IDS_PER_FIND]
            docs += await collection.find({"_id": {"$in": chunk}}).to_list()
        return docs
