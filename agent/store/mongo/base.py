"""What the three parts of the MongoDB store share: the database, its collections and what
this process remembers between a turn's reads and writes."""

from __future__ import annotations

from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import WriteError

from agent.store.mongo.errors import Doc

#: Entries kept in each of the per-turn memories below: more means turns that stopped
#: between their reads and writes (their entries are dropped, and read again if needed).
_KEPT = 4096


class MongoBase:
    """The collections the three parts of the store share."""

    def __init__(
        self,
        client: AsyncMongoClient[Doc],
        db: AsyncDatabase[Doc],
        *,
        point_reads: bool = False,
        bulk_write: bool = False,
    ) -> None:
        self._client = client
        self._db = db
        self._point_reads = point_reads
        #: The server has MongoDB 8's client-level ``bulkWrite``: a turn's end, in two
        #: collections, is one command instead of two
        self._bulk_write = bulk_write
        self._users: AsyncCollection[Doc] = db["users"]
        self._dialogs: AsyncCollection[Doc] = db["dialogs"]
        self._utterances: AsyncCollection[Doc] = db["utterances"]
        self._keys: AsyncCollection[Doc] = db["idempotency_keys"]
        #: user id → their document as taking the first place in line returned it (see
        #: :meth:`MongoLines.take_place`): the turn's start, read once
        self._snapshots: dict[str, Doc] = {}
        #: dialog id → the next utterance number, as this turn read it (see open_turn)
        self._next_seqs: dict[str, int] = {}

    def _keep_snapshot(self, user_id: str, doc: Doc) -> None:
        if len(self._snapshots) >= _KEPT:
            self._snapshots.clear()
        self._snapshots[user_id] = doc

    def _keep_next_seq(self, dialog_id: str, seq: int) -> None:
        if len(self._next_seqs) >= _KEPT:
            self._next_seqs.clear()
        self._next_seqs[dialog_id] = seq

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
