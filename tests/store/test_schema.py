"""The schema's version on both stores: what an upgrade step gets, and what is refused.

1.0.0's schema is version 1 and this build's :data:`LATEST` (each real upgrade adds one:
version 2 holds the handoffs of dialogs to people). Each test registers a synthetic step
:data:`LATEST` → :data:`LATEST` + 1 after the real ones, that marks every user, runs it on
a real store (a SQLite file, the tests' MongoDB), and reads the result back through the
store and the raw database.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from contextlib import closing
from typing import Any

import pytest
from bson import json_util
from pymongo import MongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.database import Database
from typer.testing import CliRunner

from agent.cli.main import app
from agent.state.handoff import Handoff
from agent.state.models import HumanUtterance, utc_now
from agent.store import Store, open_store
from agent.store.mongo import migrations as mongo_migrations
from agent.store.schema import SchemaRefused
from agent.store.sqlite import base as sqlite_base

# A store's own behaviour: on SQLite and MongoDB, as the contract suite (tests/conftest.py).
pytestmark = pytest.mark.both_stores

#: The ``user_version`` (SQLite) and ``chorus_meta`` version (MongoDB) the last builds
#: before 1.0.0 wrote, in their own numbering.
LAST_SQLITE_BEFORE_1_0 = 6
LAST_MONGODB_BEFORE_1_0 = 4


REAL_SQLITE = sqlite_base.UPGRADES
REAL_MONGODB = mongo_migrations.UPGRADES
#: The schema version this build writes, its real upgrades run.
LATEST = sqlite_base.latest_version()
assert mongo_migrations.latest_version() == LATEST, "both stores number their schema alike"


class Steps:
    """A synthetic upgrade :data:`LATEST` → :data:`LATEST` + 1 after the real ones,
    registered on the store of ``db_url``, that counts its runs; with ``fail``, it writes
    its mark and then fails (a start cut short)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
        self.runs = 0
        self.fail = False
        self._monkeypatch = monkeypatch
        self._sqlite = db_url.startswith("sqlite")

    def register(self) -> None:
        if self._sqlite:
            steps = (*sqlite_base.UPGRADES, self._sqlite_step)
            self._monkeypatch.setattr(sqlite_base, "UPGRADES", steps)
        else:
            upgrades = (*mongo_migrations.UPGRADES, self._mongo_step)
            self._monkeypatch.setattr(mongo_migrations, "UPGRADES", upgrades)

    def forget(self) -> None:
        """The build before the upgrade: it knows the real versions only."""
        self._monkeypatch.setattr(sqlite_base, "UPGRADES", REAL_SQLITE)
        self._monkeypatch.setattr(mongo_migrations, "UPGRADES", REAL_MONGODB)

    def _sqlite_step(self, db: sqlite3.Connection) -> None:
        self.runs += 1
        db.execute("UPDATE users SET doc = json_set(doc, '$.attributes.upgraded', json('true'))")
        if self.fail:
            raise RuntimeError("the upgrade died half-way")

    async def _mongo_step(self, db: AsyncDatabase[dict[str, Any]]) -> None:
        self.runs += 1
        await db["users"].update_many({}, {"$set": {"attributes.upgraded": True}})
        if self.fail:
            raise RuntimeError("the upgrade died half-way")


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch, db_url: str) -> Iterator[Steps]:
    yield Steps(monkeypatch, db_url)


async def _with_store(db_url: str, work: Callable[[Store], Awaitable[Any]]) -> Any:
    store = await open_store(db_url)
    try:
        return await work(store)
    finally:
        await store.close()


async def _say_hello(store: Store) -> None:
    start = await store.turns.open_turn("ann", "http_client", 3)
    await store.turns.add_utterance(start.dialog.dialog_id, HumanUtterance(text="hello"))


async def _ann(store: Store) -> tuple[list[str], dict[str, Any]]:
    dialogs = await store.reader.user_dialogs("ann")
    assert dialogs is not None
    (dialog,) = dialogs
    return [u.text for u in dialog.utterances], dialog.human.attributes


def _recorded_version(db_url: str) -> Any:
    """What the database says its version is, read past the store."""
    if db_url.startswith("sqlite"):
        with closing(sqlite3.connect(db_url.removeprefix("sqlite:///"))) as db:
            return (
                db.execute("PRAGMA application_id").fetchone()[0] == sqlite_base.APPLICATION_ID,
                db.execute("PRAGMA user_version").fetchone()[0],
            )
    client: MongoClient[dict[str, Any]]
    with MongoClient(db_url) as client:
        return list(client.get_default_database()["chorus_meta"].find())


def _version(db_url: str, version: int) -> Any:
    """:func:`_recorded_version` of a database of this numbering at ``version``."""
    if db_url.startswith("sqlite"):
        return (True, version)
    return [{"_id": "chorus", "schema": version}]


def _snapshot(db_url: str) -> Any:
    """Everything the database holds, to show that a refusal changed nothing."""
    if db_url.startswith("sqlite"):
        with closing(sqlite3.connect(db_url.removeprefix("sqlite:///"))) as db:
            return [*db.iterdump(), _recorded_version(db_url)]
    client: MongoClient[dict[str, Any]]
    with MongoClient(db_url) as client:
        database: Database[dict[str, Any]] = client.get_default_database()
        return {
            name: json_util.dumps(list(database[name].find().sort("_id")))
            for name in sorted(database.list_collection_names())
        }


async def test_a_new_store_is_at_the_latest_version(db_url: str) -> None:
    await _with_store(db_url, _say_hello)
    assert _recorded_version(db_url) == _version(db_url, LATEST)


async def test_an_upgrade_step_runs_once_keeps_the_data_and_records_its_version(
    db_url: str, steps: Steps
) -> None:
    await _with_store(db_url, _say_hello)
    steps.register()
    assert await _with_store(db_url, _ann) == (["hello"], {"upgraded": True})
    assert _recorded_version(db_url) == _version(db_url, LATEST + 1)
    # the next start finds the database up to date: the step does not run again
    await _with_store(db_url, _say_hello)
    assert steps.runs == 1
    assert await _with_store(db_url, _ann) == (["hello", "hello"], {"upgraded": True})


async def test_an_upgrade_cut_short_is_run_again_by_the_next_start(
    db_url: str, steps: Steps
) -> None:
    await _with_store(db_url, _say_hello)
    steps.register()
    steps.fail = True
    with pytest.raises(RuntimeError, match="died half-way"):
        await open_store(db_url)
    # still the latest real version (SQLite: the step's writes rolled back with it;
    # MongoDB's steps are idempotent), so the next start runs the step again and records it
    assert _recorded_version(db_url) == _version(db_url, LATEST)
    steps.fail = False
    assert await _with_store(db_url, _ann) == (["hello"], {"upgraded": True})
    assert steps.runs == 2
    assert _recorded_version(db_url) == _version(db_url, LATEST + 1)


async def test_a_store_newer_than_the_build_is_refused_and_left_alone(
    db_url: str, steps: Steps
) -> None:
    steps.register()
    await _with_store(db_url, _say_hello)
    steps.forget()
    before = _snapshot(db_url)
    with pytest.raises(SchemaRefused) as refused:
        await open_store(db_url)
    said = str(refused.value)
    assert f"schema version {LATEST + 1}, written by a newer Chorus" in said
    assert f"this build knows versions up to {LATEST}" in said
    assert _snapshot(db_url) == before


def _write_before_1_0(db_url: str, version: int) -> None:
    """A database as a build before 1.0.0 left it: the tables it made (SQLite: the same
    as version 1's, without the application id) holding a user, its version in the old
    numbering."""
    if db_url.startswith("sqlite"):
        with closing(sqlite3.connect(db_url.removeprefix("sqlite:///"))) as db:
            db.executescript(sqlite_base._SCHEMA)
            db.execute("INSERT INTO users VALUES ('h1', 'ann', ?)", ['{"user_external_id": "ann"}'])
            db.commit()
            db.execute(f"PRAGMA user_version = {version}")
        return
    client: MongoClient[dict[str, Any]]
    with MongoClient(db_url) as client:
        database: Database[dict[str, Any]] = client.get_default_database()
        database["users"].insert_one({"_id": "h1", "user_external_id": "ann"})
        if version:
            database["chorus_meta"].insert_one({"_id": "schema", "version": version})


@pytest.mark.parametrize("old_version", [0, 1, "last"])
def test_a_database_of_a_build_before_1_0_is_refused_naming_its_version(
    db_url: str, old_version: int | str
) -> None:
    """Never read as this numbering: an old 1 is not version 1, an old 6 no future 6."""
    last = LAST_SQLITE_BEFORE_1_0 if db_url.startswith("sqlite") else LAST_MONGODB_BEFORE_1_0
    version = last if old_version == "last" else int(old_version)
    _write_before_1_0(db_url, version)
    before = _snapshot(db_url)
    with pytest.raises(SchemaRefused) as refused:
        asyncio.run(open_store(db_url))
    said = str(refused.value)
    assert f"written by a Chorus build before 1.0.0 (schema version {version}" in said
    assert "Export it with the build that wrote it (`chorus export --all" in said
    assert "`chorus import backup.jsonl --db ...` into a new database" in said
    assert _snapshot(db_url) == before

    # what someone starting a command on it reads
    result = CliRunner().invoke(app, ["stats", "--db-url", db_url])
    assert result.exit_code == 1
    assert "written by a Chorus build before 1.0.0" in " ".join(result.output.split())
    assert _snapshot(db_url) == before


async def test_a_store_of_version_1_is_upgraded_to_hold_handoffs_and_keeps_its_data(
    db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Version 2, the first real upgrade: a database 1.0.0 wrote gets the handoffs of
    dialogs to people, and its dialogs can be handed off at once; the log says so."""
    monkeypatch.setattr(sqlite_base, "UPGRADES", ())
    monkeypatch.setattr(mongo_migrations, "UPGRADES", ())
    await _with_store(db_url, _say_hello)
    assert _recorded_version(db_url) == _version(db_url, 1)
    monkeypatch.setattr(sqlite_base, "UPGRADES", REAL_SQLITE)
    monkeypatch.setattr(mongo_migrations, "UPGRADES", REAL_MONGODB)
    caplog.set_level(logging.INFO, logger="chorus.store")

    async def hand_off(store: Store) -> tuple[list[str], Handoff | None]:
        (dialog,) = await store.reader.user_dialogs("ann") or []
        asked = Handoff(
            dialog_id=dialog.dialog_id,
            user_id="ann",
            state="waiting",
            requested_by="api",
            requested_at=utc_now(),
        )
        await store.handoffs.request_handoff(asked)
        return [u.text for u in dialog.utterances], await store.handoffs.handoff(dialog.dialog_id)

    texts, handoff = await _with_store(db_url, hand_off)
    assert texts == ["hello"]
    assert handoff is not None and handoff.state == "waiting"
    assert _recorded_version(db_url) == _version(db_url, 2)
    assert sum("schema from version 1 to 2" in r.getMessage() for r in caplog.records) == 1


async def test_a_new_database_is_made_up_to_date_without_news_of_an_upgrade(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A first start makes the latest schema: a log line "upgrading from version 1" there
    would tell a new user of data that never existed."""
    caplog.set_level(logging.INFO, logger="chorus.store")
    await _with_store(db_url, _say_hello)
    assert _recorded_version(db_url) == _version(db_url, len(REAL_SQLITE) + 1)
    assert not [r.getMessage() for r in caplog.records if "upgrading" in r.getMessage()]
