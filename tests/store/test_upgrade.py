"""Databases written by the previous release keep working: claims stored before message
ids had leases and fingerprints. (Keys and nested lists that the MongoDB codec now escapes
could not be stored on FerretDB before, so no such document exists there; on MongoDB the
codec reads the old, unescaped forms as they are.)"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pymongo import AsyncMongoClient

from agent.store.base import ClaimStatus
from agent.store.sqlite import SqliteStore
from tests.store.conftest import mongo_store

#: The previous release's table of message ids.
_OLD_MESSAGES = ("CREATE TABLE messages (user TEXT NOT NULL, key TEXT NOT NULL, reply TEXT, "
                 "PRIMARY KEY (user, key))")


def now_and_later() -> tuple[datetime, datetime]:
    now = datetime.now(UTC)
    return now, now + timedelta(seconds=30)


async def test_sqlite_message_ids_of_the_previous_release_keep_their_meaning(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute(_OLD_MESSAGES)
    old.execute("INSERT INTO messages VALUES ('ann', 'answered', '{\"response\": \"hi\"}')")
    old.execute("INSERT INTO messages VALUES ('ann', 'abandoned', NULL)")
    old.commit()
    old.close()
    store = await SqliteStore.open(f"sqlite:///{path}")
    try:
        now, later = now_and_later()
        answered = await store.claim_message("ann", "answered", "any", later, now)
        assert (answered.status, answered.reply) == (ClaimStatus.ANSWERED, {"response": "hi"})
        # a claim left by an old agent has no lease: it is taken over, and then held
        taken = await store.claim_message("ann", "abandoned", "fp", later, now)
        assert taken.status is ClaimStatus.CLAIMED
        again = await store.claim_message("ann", "abandoned", "fp", later, now)
        assert again.status is ClaimStatus.IN_FLIGHT
    finally:
        await store.close()


async def test_mongodb_documents_of_the_previous_release_read_back(mongodb_url: str) -> None:
    async with mongo_store(mongodb_url) as (store, url):
        raw: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
        try:
            db = raw.get_default_database()
            await db["messages"].insert_many([
                {"_id": "3:ann:answered", "user": "ann", "reply": {"response": "hi"}},
                {"_id": "3:ann:abandoned", "user": "ann", "reply": None}])
        finally:
            await raw.close()
        now, later = now_and_later()
        answered = await store.claim_message("ann", "answered", "any", later, now)
        assert (answered.status, answered.reply) == (ClaimStatus.ANSWERED, {"response": "hi"})
        taken = await store.claim_message("ann", "abandoned", "fp", later, now)
        assert taken.status is ClaimStatus.CLAIMED
        again = await store.claim_message("ann", "abandoned", "fp", later, now)
        assert again.status is ClaimStatus.IN_FLIGHT
