"""The test MongoDB server does what our store relies on, and keeps its data over a restart.

These run on whatever :func:`running_mongodb` gives (``MONGODB_URL``, or FerretDB), so the
operations the MongoDB store depends on are checked on the server its tests use. The
restart tests need a server this process controls, so they always use FerretDB.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pymongo import (
    ASCENDING,
    AsyncMongoClient,
    DeleteOne,
    InsertOne,
    MongoClient,
    ReturnDocument,
    UpdateOne,
)
from pymongo.errors import ClientBulkWriteException, DuplicateKeyError, OperationFailure

from agent.store.mongo import BULK_WRITE_WIRE_VERSION
from tests.support.mongo_server import (
    FerretDB,
    MongoServerError,
    ferretdb_available,
    mongodb_required,
    running_mongodb,
    running_mongodb_8,
    start_ferretdb,
    unavailable_reason,
    wire_version,
)

Doc = dict[str, Any]

pytestmark = pytest.mark.skipif(
    unavailable_reason() is not None and not mongodb_required(),
    reason=unavailable_reason() or "",
)

needs_ferretdb = pytest.mark.skipif(
    not ferretdb_available() and not mongodb_required(),
    reason="restarting a server needs FerretDB, built with Go: install Go 1.24+",
)


@pytest.fixture(scope="module")
def mongodb() -> Iterator[str]:
    with running_mongodb() as url:
        yield url


@pytest.fixture
async def db(mongodb: str) -> AsyncIterator[Any]:
    """A database of this test's own, through the async client the store uses."""
    client: AsyncMongoClient[Doc] = AsyncMongoClient(mongodb, tz_aware=True)
    name = f"chorus_probe_{uuid.uuid4().hex[:12]}"
    try:
        yield client[name]
    finally:
        await client.drop_database(name)
        await client.close()


async def test_documents_and_dates_round_trip(db: Any) -> None:
    # BSON dates hold milliseconds: a datetime with whole milliseconds comes back equal.
    now = datetime(2026, 11, 21, 12, 0, 0, 123000, tzinfo=UTC)
    doc = {"_id": "d1", "date_start": now, "nested": {"list": [1, "two", None], "ok": True}}
    await db.dialogs.insert_one(doc)
    assert await db.dialogs.find_one({"_id": "d1"}) == doc
    assert await db.dialogs.find_one({"date_start": {"$gte": now}}) == doc


async def test_unique_index_refuses_duplicates(db: Any) -> None:
    await db.users.create_index([("user_external_id", ASCENDING)], unique=True)
    await db.users.insert_one({"_id": "h1", "user_external_id": "alice"})
    with pytest.raises(DuplicateKeyError):
        await db.users.insert_one({"_id": "h2", "user_external_id": "alice"})
    with pytest.raises(DuplicateKeyError):
        await db.users.insert_one({"_id": "h1", "user_external_id": "bob"})
    assert await db.users.count_documents({}) == 1


async def test_inc_returns_the_document_after(db: Any) -> None:
    await db.dialogs.insert_one({"_id": "d1", "utterance_count": 0})
    for expected in (1, 2, 3):
        after = await db.dialogs.find_one_and_update(
            {"_id": "d1"},
            {"$inc": {"utterance_count": 1}},
            return_document=ReturnDocument.AFTER,
        )
        assert after == {"_id": "d1", "utterance_count": expected}
    missing = await db.dialogs.find_one_and_update(
        {"_id": "nope"}, {"$inc": {"utterance_count": 1}}, return_document=ReturnDocument.AFTER
    )
    assert missing is None


async def test_set_on_dotted_paths_merges_keys(db: Any) -> None:
    await db.users.insert_one({"_id": "h1", "attributes": {"kept": 1}})
    await db.users.update_one({"_id": "h1"}, {"$set": {"attributes.name": "Ann"}})
    await db.users.update_one({"_id": "h1"}, {"$set": {"attributes.deep.er": [1, 2]}})
    await db.users.update_one({"_id": "h1"}, {"$set": {"bot.attributes.mood": "ok"}})
    assert await db.users.find_one({"_id": "h1"}) == {
        "_id": "h1",
        "attributes": {"kept": 1, "name": "Ann", "deep": {"er": [1, 2]}},
        "bot": {"attributes": {"mood": "ok"}},
    }


@pytest.fixture
def ferretdb(tmp_path: Path) -> Iterator[FerretDB]:
    with start_ferretdb(tmp_path / "state") as server:
        yield server


@needs_ferretdb
async def test_data_survives_stop_and_start(ferretdb: FerretDB) -> None:
    url = ferretdb.url
    # One client across the outage, as the store keeps one: it reconnects by itself.
    client: AsyncMongoClient[Doc] = AsyncMongoClient(url, serverSelectionTimeoutMS=10_000)
    try:
        await client.chorus_probe.kept.insert_one({"_id": "x", "v": 1})
        ferretdb.stop()
        assert not ferretdb.running
        ferretdb.start()
        assert ferretdb.url == url
        assert await client.chorus_probe.kept.find_one({"_id": "x"}) == {"_id": "x", "v": 1}
        await client.chorus_probe.kept.insert_one({"_id": "y", "v": 2})
        ferretdb.kill()  # a crash: what was acknowledged is still there
        ferretdb.start()
        assert await client.chorus_probe.kept.count_documents({}) == 2
    finally:
        await client.close()


@needs_ferretdb
def test_a_server_that_cannot_start_says_why(ferretdb: FerretDB) -> None:
    # The port is taken (by the running server): the second one exits at once.
    with pytest.raises(MongoServerError, match="address already in use"):
        FerretDB(ferretdb.binary, ferretdb.state_dir, port=ferretdb.port).start()
    client: MongoClient[Doc] = MongoClient(ferretdb.url)
    try:
        assert client.admin.command("ping")["ok"] == 1
    finally:
        client.close()


def test_the_mongodb_8_server_answers_pymongos_client_bulk_write() -> None:
    """The MongoDB 8 test server (a real MongoDB 8, or FerretDB with ``-bulk-write``) runs
    PyMongo's own client-level ``bulk_write`` the way MongoDB 8 does: in order, across
    collections, stopping at the first error of an ordered batch."""
    with running_mongodb_8() as url:
        client: MongoClient[Doc] = MongoClient(url)
        name = f"chorus_probe_{uuid.uuid4().hex[:12]}"
        try:
            assert wire_version(url) >= BULK_WRITE_WIRE_VERSION
            done = client.bulk_write(
                [
                    InsertOne({"_id": 1, "n": 1}, namespace=f"{name}.a"),
                    UpdateOne({"_id": "u"}, {"$set": {"v": 2}}, upsert=True, namespace=f"{name}.b"),
                    UpdateOne({"_id": 1}, {"$inc": {"n": 1}}, namespace=f"{name}.a"),
                    DeleteOne({"_id": "absent"}, namespace=f"{name}.b"),
                ],
                verbose_results=True,
            )
            assert (done.inserted_count, done.upserted_count) == (1, 1)
            assert (done.matched_count, done.modified_count, done.deleted_count) == (1, 1, 0)
            assert done.update_results[1].upserted_id == "u"
            with pytest.raises(ClientBulkWriteException) as refused:
                client.bulk_write(
                    [
                        InsertOne({"_id": 1}, namespace=f"{name}.a"),
                        UpdateOne({"_id": 1}, {"$inc": {"n": 10}}, namespace=f"{name}.a"),
                    ]
                )
            # PyMongo types them as WriteError; they are the server's error documents.
            errors: list[Any] = list(refused.value.write_errors or [])
            assert [(error["idx"], error["code"]) for error in errors] == [(0, 11000)]
            assert list(client[name].a.find()) == [{"_id": 1, "n": 2}]
            assert list(client[name].b.find()) == [{"_id": "u", "v": 2}]
        finally:
            client.drop_database(name)
            client.close()


@needs_ferretdb
def test_without_its_flag_ferretdb_is_a_mongodb_7_without_bulk_write(tmp_path: Path) -> None:
    """The 5-command turn of MongoDB 6 and 7 is tested on a server that, like them, has no
    client-level bulkWrite."""
    with start_ferretdb(tmp_path / "state") as server:
        assert wire_version(server.url) < BULK_WRITE_WIRE_VERSION
        client: MongoClient[Doc] = MongoClient(server.url)
        try:
            with pytest.raises(OperationFailure, match="bulkWrite"):
                client.admin.command(
                    {
                        "bulkWrite": 1,
                        "ops": [{"insert": 0, "document": {"_id": 1}}],
                        "nsInfo": [{"ns": "chorus_probe.a"}],
                    }
                )
        finally:
            client.close()
