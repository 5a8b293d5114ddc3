"""The MongoDB store: PyMongo's async API, one document per user, dialog and utterance.

One module per job: :mod:`.dialogs` (the turn and the read API, :class:`DialogStore`),
:mod:`.claims` (clients' message ids, :class:`ClaimStore`), :mod:`.lines` (the users'
line, :class:`LineStore`), :mod:`.codec` (the key codec), :mod:`.documents` (documents ↔
models) and :mod:`.errors` (PyMongo's failures as the store's exceptions);
:class:`MongoStore` is the three over one client.

Why it looks the way it does:

* **Bounded turns.** A turn reads the dialog's document and its last K utterances (an
  indexed ``(dialog_id, seq)`` range, newest first, ``limit K``) and writes a fixed number
  of documents. The dialog document holds a counter, never the utterances, so no document
  grows with the dialog (MongoDB refuses documents over 16 MB).
* **No lost updates without transactions.** Every write that can race is one atomic
  single-document operation, and attributes are merged key by key with
  ``$set: {"attributes.<key>": value}``, so two turns merging different keys both survive.
  Inside a turn, an utterance's ``seq`` is the dialog's counter as the turn read it (the
  user's line runs one turn of a dialog at a time), raised with ``$max`` in the same
  update that names the utterance in the ring and merges the bot's attributes; outside a
  turn, or when the unique ``(dialog_id, seq)`` index finds the number taken, it comes
  from ``$inc`` (never "read the max, then insert"). Nothing relies on multi-document
  transactions, which FerretDB does not have.
* **Few round trips.** A steady-state turn sends 12 commands (counted by
  ``tests/api/test_turn_commands.py``): the line (find, insert; then one ``update`` that
  leaves the place and raises the hint, and a delete of an old place), the user, the
  dialog and the window (three finds), the human utterance (the dialog's update, the
  insert), and the turn's end (the dialog's update, one ``update`` command holding the
  annotated human utterance and the bot's answer as an insert-only upsert, the user's
  attribute merges).
* **Point reads on the hot path.** A user document's ``_id`` is derived from the client's
  ``user_id`` (:func:`_human_id_for`), and it holds the id of the user's open dialog
  (``active_dialog``), so a turn finds the user and the dialog by ``_id``: the cheapest read
  on MongoDB, and the only one FerretDB 1.x answers from an index (it scans the whole
  collection for any other filter).
* **One open dialog per user** is a plain unique index on ``active_key``: ``"h:<human id>"``
  while the dialog is open, ``"d:<dialog id>"`` once closed. The user's ``active_dialog``
  is only a pointer to it: a pointer that is missing or names a closed dialog (an agent
  that died between the two writes) is repaired from the index the next time. The
  obvious partial unique index (``{human_id: 1}`` where ``active: true``) is refused by
  FerretDB 1.x ("Index option partialFilterExpression is not implemented yet") and
  ``sparse`` is silently ignored there, while an upsert on ``{human_id, active: true}``
  alone is not atomic (two racing upserts can both insert, on MongoDB too). A unique key
  that is always present works everywhere.
* **Free-form JSON is stored losslessly.** Annotations and attributes come from services;
  keys containing ``.``, a leading ``$`` or NUL cannot be stored as BSON field names
  (FerretDB refuses them, MongoDB restricts them), so every key is escaped on the way in
  (``%`` → ``%25``, ``.`` → ``%2E``, leading ``$`` → ``%24``, NUL → ``%00``, and whitespace at
  either end of a key, which FerretDB refuses in update paths) and unescaped on the way
  out. Our own field names contain none of those, so they are stored as they are.
  A list directly inside a list is stored as ``{"%a": [...]}`` (FerretDB 1.x refuses nested
  arrays; MongoDB reads either form back, so data written before this is read as it was).
* **Dates are BSON dates**: documents are built with ``model_dump()`` in Python mode, and
  the client is ``tz_aware`` so they read back as aware UTC datetimes.
* **FerretDB 1.x** (the tests' server) executes an update as "find, change in Go, write
  the whole document back" with nothing in between, so two updates of one document on two
  connections can lose one of them (``$inc`` included). When :meth:`MongoStore.open` finds
  FerretDB (``buildInfo`` has ``ferretdbVersion``) it keeps one connection, so this
  process's commands run one at a time and each is atomic again; utterance numbers are
  also guarded by the unique ``(dialog_id, seq)`` index and retried. Across replicas,
  turns of one user never overlap (the user's line, below, is built from inserts only), so
  their updates of the user's documents cannot interleave; MongoDB has none of this.
* **Unreachable database → :class:`StoreUnavailable`** from every method (the API answers
  503), with a short server-selection timeout so a request fails fast instead of hanging.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from pymongo import ASCENDING, AsyncMongoClient
from pymongo.monitoring import CommandListener

from agent.store.mongo.claims import MongoClaims
from agent.store.mongo.codec import _escape, _escape_key, _literal, _unescape, _unescape_key
from agent.store.mongo.dialogs import RECENT_IDS, MongoDialogs
from agent.store.mongo.errors import Doc, _unavailable_when_unreachable
from agent.store.mongo.lines import _QUEUE_KEPT, MongoLines

__all__ = ["RECENT_IDS", "_QUEUE_KEPT", "MongoStore", "_escape", "_escape_key", "_unescape",
           "_unescape_key"]

log = logging.getLogger("chorus.store")

#: Database used when the URL names none (``mongodb://host:27017``).
DEFAULT_DATABASE = "chorus"
#: Milliseconds to find a server / open a connection before a call fails with 503.
DEFAULT_TIMEOUT_MS = 3000


@_unavailable_when_unreachable
async def _is_ferretdb(client: AsyncMongoClient[Doc]) -> bool:
    info = await client.admin.command("buildInfo")
    return "ferretdbVersion" in info


class MongoStore(MongoDialogs, MongoClaims, MongoLines):
    """:class:`agent.store.Store` on MongoDB (or a wire-compatible server such as FerretDB):
    the dialogs, the claims and the line, each in its own module, over one client."""

    @classmethod
    async def open(
        cls, url: str, *, event_listeners: Sequence[CommandListener] = (),
    ) -> MongoStore:
        """Connect and create the indexes (idempotent: creating an existing index with the
        same spec is a no-op). ``event_listeners`` lets tests count the commands sent."""
        options: dict[str, Any] = {
            "tz_aware": True, "tzinfo": UTC, "appname": "chorus",
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
            ferretdb = await _is_ferretdb(client)
            if ferretdb:
                log.info("FerretDB found: one connection, so its non-atomic updates cannot "
                         "interleave, and utterances read by _id")
                await client.close()
                client = AsyncMongoClient(url, **{**options, "maxPoolSize": 1})
            store = cls(client, client.get_default_database(DEFAULT_DATABASE),
                        point_reads=ferretdb)
            await store._create_indexes()
        except BaseException:
            await client.close()
            raise
        return store

    @_unavailable_when_unreachable
    async def _create_indexes(self) -> None:
        await self._users.create_index([("user_external_id", ASCENDING)], unique=True,
                                       name="user_external_id")
        await self._dialogs.create_index([("active_key", ASCENDING)], unique=True,
                                         name="one_active_dialog")
        await self._dialogs.create_index([("human_id", ASCENDING), ("date_start", ASCENDING)],
                                         name="dialogs_by_human")
        await self._utterances.create_index([("dialog_id", ASCENDING), ("seq", ASCENDING)],
                                            unique=True, name="dialog_seq")
        await self._queue.create_index([("user", ASCENDING), ("place", ASCENDING)],
                                       name="places_by_user")

    @_unavailable_when_unreachable
    async def delete_user(self, external_id: str) -> bool:
        """Utterances first, the user last: an erasure cut short can be run again, and
        finds the user still there to finish the job."""
        await self._messages.delete_many({"user": _literal(external_id)})
        self._served.pop(external_id, None)
        await self._queue.delete_many({"user": _literal(external_id)})
        human_id = await self._human_id(external_id)
        if human_id is None:
            return False
        dialog_ids = await self._dialogs.distinct("_id", {"human_id": human_id})
        await self._utterances.delete_many({"dialog_id": {"$in": dialog_ids}})
        await self._dialogs.delete_many({"human_id": human_id})
        await self._users.delete_one({"_id": human_id})
        return True

    # -- lifecycle ----------------------------------------------------------------------

    @_unavailable_when_unreachable
    async def ping(self) -> None:
        await self._db.command("ping")

    async def close(self) -> None:
        await self._client.close()

