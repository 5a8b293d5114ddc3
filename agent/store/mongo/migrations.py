"""Databases written by an earlier release, brought up to date when the store opens.

The schema's version is one document, ``{_id: "schema", version: N}`` in ``chorus_meta``.
Every step is idempotent and safe to run again, so a migration cut short (a crash, two
agents starting at once) is finished by the next start. Progress is logged, because a
large database takes a while.

Version 4 (this release): a traced call names the service's ``role`` and, in a dp-agent
pipeline, its ``dream_group``, where it used to say ``group`` for either
(:func:`~agent.state.models.call_with_role`). Human utterances are read 500 at a time
and their traces rewritten 50 to a command; an entry with ``group`` written
meanwhile by an agent of the previous release (a rolling upgrade) reads the same way.

Version 3: idempotency keys expire. Each claim gets ``expires_at`` (those
stored before get a day from the upgrade) and a TTL index on it (``keys_expire``) where the
server has TTL indexes; FerretDB 1.x has none, and the agent's reads ignore expired claims
there (:mod:`agent.store.mongo.keys`), so only their space is not given back.

Version 2:

* ``messages`` is renamed ``idempotency_keys``, its ``user`` field ``user_id``;
* the users' line moved into the user's document: ``turn_queue`` is dropped (the places
  in it belonged to turns of agents that are no longer running);
* an open dialog's changing part (the bot, its attributes and the utterance count) moved
  into the user's document (``dialog``), which used to point at it (``active_dialog``).
  Utterances keep their ids; those stored before are read by their ``(dialog_id, seq)``
  index, those stored after have ids numbered by the dialog (``<dialog id>-<seq>``).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from pymongo import ASCENDING, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import OperationFailure

from agent.state.models import call_with_role, utc_now
from agent.store.base import DEFAULT_KEY_RETENTION
from agent.store.mongo.documents import _head, _open_dialog_state
from agent.store.mongo.errors import Doc

log = logging.getLogger("chorus.store")

SCHEMA_VERSION = 4
#: The server's answer to an index option it does not have (FerretDB 1.x: TTL indexes).
_NOT_IMPLEMENTED = 238
#: Log a line every this many documents migrated.
_PROGRESS_EVERY = 1000
#: Utterances read per step of a migration that rewrites them.
_BATCH = 500
#: Updates per write command: FerretDB 1.x (1.24) never answers an ``update`` command of
#: 100 statements or more (99 take 0.14 s), so rewrites go in commands of 50.
_WRITES_PER_COMMAND = 50


async def schema_version(db: AsyncDatabase[Doc]) -> int:
    """The version the database was written with: 0 before versions were kept, or for an
    empty database (whose migration finds nothing to do)."""
    doc = await db["chorus_meta"].find_one({"_id": "schema"})
    return 0 if doc is None else int(doc["version"])


async def migrate(db: AsyncDatabase[Doc]) -> None:
    """Bring the database to :data:`SCHEMA_VERSION`."""
    version = await schema_version(db)
    if version >= SCHEMA_VERSION:
        return
    if version > 0 or await db["users"].find_one({}, projection={"_id": 1}) is not None:
        log.info(
            "migrating the MongoDB database from schema version %d to %d", version, SCHEMA_VERSION
        )
    if version < 2:
        await _rename_keys(db)
        await db["turn_queue"].drop()
        await _embed_open_dialogs(db)
    if version < 3:
        await _expire_keys(db)
    await _roles_from_groups(db)
    await db["chorus_meta"].update_one(
        {"_id": "schema"}, {"$set": {"version": SCHEMA_VERSION}}, upsert=True
    )


async def _rename_keys(db: AsyncDatabase[Doc]) -> None:
    names = set(await db.list_collection_names())
    if "messages" in names and "idempotency_keys" not in names:
        await db["messages"].rename("idempotency_keys")
    keys = db["idempotency_keys"]
    try:
        await keys.update_many({"user": {"$exists": True}}, {"$rename": {"user": "user_id"}})
    except OperationFailure:  # a server without $rename: one document at a time
        async for doc in keys.find({"user": {"$exists": True}}):
            await keys.update_one(
                {"_id": doc["_id"]}, {"$set": {"user_id": doc["user"]}, "$unset": {"user": ""}}
            )


async def _expire_keys(db: AsyncDatabase[Doc]) -> None:
    """Version 3: every claim expires; MongoDB deletes expired ones by a TTL index."""
    keys = db["idempotency_keys"]
    await keys.update_many(
        {"expires_at": {"$exists": False}},
        {"$set": {"expires_at": utc_now() + timedelta(seconds=DEFAULT_KEY_RETENTION)}},
    )
    try:
        await keys.create_index(
            [("expires_at", ASCENDING)], name="keys_expire", expireAfterSeconds=0
        )
    except OperationFailure as exc:
        if exc.code != _NOT_IMPLEMENTED:
            raise
        log.info(
            "the database has no TTL indexes (FerretDB 1.x): expired idempotency keys are "
            "ignored, and their space is not given back (docs/storage.md)"
        )


async def _roles_from_groups(db: AsyncDatabase[Doc]) -> None:
    """Version 4: every traced call's ``group`` becomes ``role`` (and ``dream_group``).

    One pass of a cursor over the human utterances, read 500 at a time; the rewrites go
    out as they gather. A page by page query sorted by ``_id`` would be simpler to resume,
    but FerretDB sorts every page itself (1.6 s a page over 2,000 utterances), which makes
    the whole pass quadratic; a pass cut short is finished by the next start anyway."""
    utterances = db["utterances"]
    seen = rewritten = 0
    pending: list[UpdateOne] = []
    cursor = utterances.find({"speaker": "human"}, projection={"trace": 1}, batch_size=_BATCH)
    async for doc in cursor:
        seen += 1
        trace = doc.get("trace") or []
        if any(isinstance(call, dict) and "group" in call for call in trace):
            renamed = [call_with_role(call) for call in trace]
            pending.append(UpdateOne({"_id": doc["_id"]}, {"$set": {"trace": renamed}}))
        if len(pending) >= _WRITES_PER_COMMAND:
            await utterances.bulk_write(pending, ordered=False)
            rewritten, pending = rewritten + len(pending), []
        if seen % (_PROGRESS_EVERY * 10) == 0:
            log.info("migration: %d human utterances looked at, %d traces renamed", seen, rewritten)
    if pending:
        await utterances.bulk_write(pending, ordered=False)
        rewritten += len(pending)
    if rewritten:
        log.info("migration: %d traces renamed group to role", rewritten)


async def _embed_open_dialogs(db: AsyncDatabase[Doc]) -> None:
    """Each open dialog's changing part into its user's document."""
    users, dialogs = db["users"], db["dialogs"]
    done = 0
    async for doc in dialogs.find({"active": True}):
        user = await users.find_one({"_id": doc["human_id"]})
        if user is None or "dialog" in user:
            continue
        pointer = user.get("active_dialog")
        if pointer not in (None, doc["_id"]):
            pointed = await dialogs.find_one({"_id": pointer})
            if pointed is not None and pointed.get("active"):
                continue  # the user's pointer names another open dialog: that one is used
        state = _open_dialog_state(_head(doc))
        state["count"] = int(doc.get("utterance_count", 0))
        await users.update_one(
            {"_id": user["_id"], "dialog": {"$exists": False}}, {"$set": {"dialog": state}}
        )
        await dialogs.update_one({"_id": doc["_id"]}, {"$set": {"active_key": "d:" + doc["_id"]}})
        done += 1
        if done % _PROGRESS_EVERY == 0:
            log.info("migration: %d open dialogs moved into their users' documents", done)
    # Dialogs left open that no user uses (a crash between two writes of the old layout).
    await dialogs.update_many(
        {"active": True, "active_key": {"$regex": "^h:"}}, {"$set": {"active": False}}
    )
    await users.update_many({"active_dialog": {"$exists": True}}, {"$unset": {"active_dialog": ""}})
