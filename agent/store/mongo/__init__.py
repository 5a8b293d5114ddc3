"""The MongoDB store: PyMongo's async API, one document per user, dialog and utterance.

:class:`MongoStore` holds one part per kind of caller, each in its own module over one
:class:`~.base.MongoDb` (the client and the collections), and does itself what spans them:
erasure, the indexes and the connection. What the collections hold, what a turn costs
(five commands, four on MongoDB 8), why no write is lost without transactions, and what a
stock FerretDB cannot guarantee: docs/storage.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from pymongo import ASCENDING, AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import OperationFailure
from pymongo.monitoring import CommandListener

from agent.store.mongo.base import MongoDb
from agent.store.mongo.codec import escape, escape_key, literal, unescape, unescape_key
from agent.store.mongo.documents import human_id_for
from agent.store.mongo.errors import Doc, unavailable_when_unreachable
from agent.store.mongo.handoffs import MongoHandoffs
from agent.store.mongo.keys import MongoKeys
from agent.store.mongo.lifecycle import MongoLifecycle
from agent.store.mongo.migrations import latest_version, migrate, stored_version
from agent.store.mongo.numbering import Numbering
from agent.store.mongo.queues import MongoQueues
from agent.store.mongo.ratings import MongoRatings
from agent.store.mongo.reads import MongoReads
from agent.store.mongo.restore import MongoRestore
from agent.store.mongo.turns import MongoTurns
from agent.store.schema import behind

__all__ = ["MongoStore", "escape", "escape_key", "unescape", "unescape_key"]

log = logging.getLogger("chorus.store")

#: Database used when the URL names none (``mongodb://host:27017``).
DEFAULT_DATABASE = "chorus"
#: Milliseconds to find a server / open a connection before a call fails with 503.
DEFAULT_TIMEOUT_MS = 3000
#: The server's answer to an index option it does not have (FerretDB 1.x: TTL indexes).
_NOT_IMPLEMENTED = 238


#: What a FerretDB build says in its version when it has the fixes that
#: ``tools/ferretdb/build.sh`` applies: MongoDB's atomic single-document writes, and reads
#: narrowed by ``_id`` for any filter naming one (or an ``$in`` of them).
FIXED_FERRETDB = "+chorus-fixes"


@unavailable_when_unreachable
async def _stock_ferretdb(client: AsyncMongoClient[Doc]) -> bool:
    """Whether the server is a FerretDB without those fixes, which the store must treat
    with care (see the package docstring)."""
    info = await client.admin.command("buildInfo")
    version = info.get("ferretdbVersion")
    return isinstance(version, str) and not version.endswith(FIXED_FERRETDB)


#: The wire version of MongoDB 8.0, the first with the client-level ``bulkWrite`` command.
BULK_WRITE_WIRE_VERSION = 25


@unavailable_when_unreachable
async def _has_bulk_write(client: AsyncMongoClient[Doc]) -> bool:
    """Whether the server answers MongoDB 8's ``bulkWrite`` (it says so by its wire
    version)."""
    hello = await client.admin.command("hello")
    return int(hello.get("maxWireVersion", 0)) >= BULK_WRITE_WIRE_VERSION


@unavailable_when_unreachable
async def _check_schema(store: MongoStore) -> None:
    """A read-only opening must not write, so a database that would need an upgrade is
    refused (a new, empty one reads as empty)."""
    version = await stored_version(store._m.db)
    if version is not None and version != latest_version():
        raise behind(f"MongoDB store {store._m.db.name}", version, latest_version())


class MongoStore:
    """:class:`agent.store.Store` on MongoDB (or a wire-compatible server such as FerretDB):
    each part (:data:`agent.store.base.PARTS`) an object of its own over one client."""

    def __init__(
        self,
        client: AsyncMongoClient[Doc],
        db: AsyncDatabase[Doc],
        *,
        point_reads: bool = False,
        bulk_write: bool = False,
    ) -> None:
        self._m = m = MongoDb(client, db, point_reads=point_reads, bulk_write=bulk_write)
        self._outage = m.outage
        numbering = Numbering(m)
        self.turns = MongoTurns(m, numbering)
        self.reader = MongoReads(m, numbering)
        self.ratings = MongoRatings(m)
        self.restore = MongoRestore(m)
        self.keys = MongoKeys(m)
        self.queues = MongoQueues(m)
        self.handoffs = MongoHandoffs(m, numbering)
        self.lifecycle = MongoLifecycle(m)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        event_listeners: Sequence[CommandListener] = (),
        read_only: bool = False,
    ) -> MongoStore:
        """Connect, check the schema's version and run the upgrades the database lacks
        (:mod:`.migrations`), and create the indexes (idempotent: creating an existing index
        with the same spec is a no-op). ``event_listeners`` lets tests count the commands
        sent. ``read_only``: neither upgrade nor create indexes, only check that the
        database is of this build's schema, so that a reader (``chorus replay``) sends no
        write."""
        options: dict[str, Any] = {
            "tz_aware": True,
            "tzinfo": UTC,
            "appname": "chorus",
            "event_listeners": list(event_listeners),
        }
        lowered = url.lower()
        # The URL's own timeouts win; ours only keep a down database from hanging a turn.
        if "serverselectiontimeoutms" not in lowered:
            options["serverSelectionTimeoutMS"] = DEFAULT_TIMEOUT_MS
        if "connecttimeoutms" not in lowered:
            options["connectTimeoutMS"] = DEFAULT_TIMEOUT_MS
        client: AsyncMongoClient[Doc] = AsyncMongoClient(url, **options)
        try:
            stock = await _stock_ferretdb(client)
            if stock:
                log.warning(
                    "FerretDB found: one connection, so its non-atomic updates cannot "
                    "interleave, and utterances read one by one; several agents "
                    "must not share it (docs/storage.md)"
                )
                await client.close()
                client = AsyncMongoClient(url, **{**options, "maxPoolSize": 1})
            store = cls(
                client,
                client.get_default_database(DEFAULT_DATABASE),
                point_reads=stock,
                bulk_write=await _has_bulk_write(client),
            )
            if read_only:
                await _check_schema(store)
            else:
                await migrate(store._m.db)
                await store._create_indexes()
        except BaseException:
            await client.close()
            raise
        return store

    @unavailable_when_unreachable
    async def _create_indexes(self) -> None:
        await self._m.users.create_index(
            [("user_external_id", ASCENDING)], unique=True, name="user_external_id"
        )
        await self._m.dialogs.create_index(
            [("active_key", ASCENDING)], unique=True, name="one_active_dialog"
        )
        await self._m.dialogs.create_index(
            [("human_id", ASCENDING), ("date_start", ASCENDING)], name="dialogs_by_human"
        )
        await self._m.dialogs.create_index(
            [("date_start", ASCENDING), ("opened_ns", ASCENDING)], name="dialogs_by_start"
        )  # GET /api/dialogs/: pages in the order dialogs were opened
        await self._m.dialogs.create_index(
            [("dp_agent_id", ASCENDING)], sparse=True, name="dialogs_by_dp_agent_id"
        )  # GET /api/dialogs/{dp-agent's _id} of a dialog imported from dp-agent
        await self._m.utterances.create_index(
            [("dialog_id", ASCENDING), ("seq", ASCENDING)], unique=True, name="dialog_seq"
        )
        await self._m.keys.create_index([("user_id", ASCENDING)], name="keys_by_user")
        await self.handoffs.create_indexes()
        try:
            await self._m.keys.create_index(
                [("expires_at", ASCENDING)], name="keys_expire", expireAfterSeconds=0
            )
        except OperationFailure as exc:
            if exc.code != _NOT_IMPLEMENTED:
                raise
            log.info(
                "the database has no TTL indexes (FerretDB 1.x): expired idempotency keys "
                "are ignored, and their space is not given back (docs/storage.md)"
            )

    @unavailable_when_unreachable
    async def delete_user(self, user_id: str) -> bool:
        """Utterances first, the user last: an erasure cut short can be run again, and
        finds the user still there to finish the job."""
        await self._m.keys.delete_many({"user_id": literal(user_id)})
        human_id = human_id_for(user_id)
        user = await self._m.users.find_one({"_id": human_id}, projection={"dialog.id": 1})
        if user is None:
            return False
        dialog_ids = await self._m.dialogs.distinct("_id", {"human_id": human_id})
        open_id = (user.get("dialog") or {}).get("id")
        if open_id is not None and open_id not in dialog_ids:
            dialog_ids.append(open_id)
        await self._m.utterances.delete_many({"dialog_id": {"$in": dialog_ids}})
        await self._m.db["handoffs"].delete_many({"_id": {"$in": dialog_ids}})
        await self._m.dialogs.delete_many({"human_id": human_id})
        await self._m.users.delete_one({"_id": human_id})
        return True

    # -- lifecycle ----------------------------------------------------------------------

    @unavailable_when_unreachable
    async def ping(self) -> None:
        await self._m.db.command("ping")

    async def close(self) -> None:
        await self._m.outage.aclose()
        await self._m.client.close()
