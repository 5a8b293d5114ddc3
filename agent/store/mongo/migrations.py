"""The database's schema version, checked and brought up to date when the store opens.

The version is one document of ``chorus_meta``, ``{_id: "chorus", schema: N}``
(:mod:`agent.store.schema`); builds before 1.0.0 wrote ``{_id: "schema", version: N}``
instead, and a database holding that document, or users without either, is refused. A new
database is recorded at version 1 and then upgraded like any other; the indexes are
created after the upgrades (:meth:`MongoStore._create_indexes`), on every start.

MongoDB has no transaction FerretDB shares, so each upgrade step must be idempotent: a
start cut short (a crash, two agents starting at once) runs the step again, and the
version is recorded after each step.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from agent.store.mongo.errors import Doc, unavailable_when_unreachable
from agent.store.schema import FIRST_VERSION, before_first_release, newer

log = logging.getLogger("chorus.store")


async def _add_handoffs(db: AsyncDatabase[Doc]) -> None:
    """Version 2: the ``handoffs`` collection (:mod:`.handoffs`), by its index (which
    :meth:`MongoStore._create_indexes` creates on every start too)."""
    await db["handoffs"].create_index(
        [("state", ASCENDING), ("requested_at", ASCENDING)], name="handoffs_by_state"
    )


#: Upgrades, in order: ``UPGRADES[n]`` brings a database of version ``n + 1`` to ``n + 2``.
#: The schema :meth:`MongoStore._create_indexes` makes is version 1, less what they add.
UPGRADES: Sequence[Callable[[AsyncDatabase[Doc]], Awaitable[None]]] = (_add_handoffs,)
#: The ``chorus_meta`` document holding the version, and the one builds before 1.0.0 wrote.
_MARK = "chorus"
_BEFORE_FIRST_RELEASE = "schema"


def latest_version() -> int:
    """The schema version this build writes: the first and one per upgrade."""
    return FIRST_VERSION + len(UPGRADES)


async def stored_version(db: AsyncDatabase[Doc]) -> int | None:
    """The database's schema version; None for a new one (no users, no version). A
    database of a build before 1.0.0 or of a newer Chorus is refused."""
    where = f"MongoDB store {db.name}"
    meta = db["chorus_meta"]
    mark = await meta.find_one({"_id": _MARK})
    if mark is None:
        old = await meta.find_one({"_id": _BEFORE_FIRST_RELEASE})
        if old is not None:
            raise before_first_release(where, int(old.get("version", 0)))
        if await db["users"].find_one({}, projection={"_id": 1}) is not None:
            raise before_first_release(where, 0)
        return None
    version = int(mark["schema"])
    if version > latest_version():
        raise newer(where, version, latest_version())
    return version


async def _record(db: AsyncDatabase[Doc], version: int) -> None:
    try:
        await db["chorus_meta"].update_one(
            {"_id": _MARK}, {"$set": {"schema": version}}, upsert=True
        )
    except DuplicateKeyError:  # another agent's upsert won the race: set it on theirs
        await db["chorus_meta"].update_one({"_id": _MARK}, {"$set": {"schema": version}})


@unavailable_when_unreachable
async def migrate(db: AsyncDatabase[Doc]) -> None:
    """Check the database's version (refusing one this build cannot read), record version 1
    on a new database, and run the upgrades it lacks, recording each version reached."""
    version = await stored_version(db)
    new = version is None
    if version is None:
        version = FIRST_VERSION
        await _record(db, version)
    for step in UPGRADES[version - FIRST_VERSION :]:
        if not new:  # a new database is brought up to date at once: no news to anyone
            log.info("upgrading the MongoDB schema from version %d to %d", version, version + 1)
        await step(db)
        version += 1
        await _record(db, version)
