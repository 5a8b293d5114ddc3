"""Databases written by the previous release keep working after an upgrade.

``tests/store/releases/0.*`` are databases the first release's own store wrote (an SQL
dump of its SQLite file, an extended-JSON dump of its MongoDB collections): a closed
dialog, an open one, free-form attribute keys, an answered idempotency key, an utterance
left unanswered by an attempt that died mid-turn, and a place in line of an agent that
died. ``releases/1.*`` (SQLite schema 5, MongoDB schema 3) hold turns whose traces say
``group``, written by ``python -m tests.store.releases.write_release 1``. Opening them with
this release migrates them (``agent.store.*.migrate``); every test reads what the old
release stored and goes on with it.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from bson import json_util
from pymongo import AsyncMongoClient, MongoClient

from agent.state.models import BotUtterance, Human, HumanUtterance
from agent.store import Store
from agent.store.base import ClaimStatus
from agent.store.mongo import MongoStore
from agent.store.mongo import migrations as mongo_migrations
from agent.store.mongo.migrations import SCHEMA_VERSION, schema_version
from agent.store.sqlite import SqliteStore
from agent.store.sqlite import base as sqlite_base
from agent.store.sqlite.base import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION
from tests.conftest import AgentFactory, fresh_database

RELEASES = Path(__file__).parent / "releases"
#: The previous release's table of idempotency keys, before leases and fingerprints.
_OLDEST_MESSAGES = (
    "CREATE TABLE messages (user TEXT NOT NULL, key TEXT NOT NULL, "
    "reply TEXT, PRIMARY KEY (user, key))"
)


def now_and_later() -> tuple[datetime, datetime]:
    now = datetime.now(UTC)
    return now, now + timedelta(seconds=30)


async def goes_on_where_it_stopped(store: Store) -> None:
    """What the previous release stored, read and continued by this one."""
    dialogs = await store.user_dialogs("ann")
    assert dialogs is not None and len(dialogs) == 2
    closed, open_ = dialogs
    assert [u.text for u in closed.utterances] == ["hello", "hi ann"]
    assert closed.date_finish is not None and closed.bot.attributes == {"mood": "calm"}
    assert [u.text for u in open_.utterances] == [
        text for i in range(3) for text in (f"message {i}", f"answer {i}")
    ]
    assert open_.utterances[0].annotations == {"tokens": ["message", "0"]}
    assert open_.date_finish is None and open_.bot.attributes == {"seen": 2}
    assert open_.human.attributes == {"name": "Ann", "count": 3}
    bob = await store.user_dialogs("bob")
    assert bob is not None and bob[0].human.attributes == {"a.b": {"$c": 1}}

    now, later = now_and_later()
    answered = await store.claim_key("ann", "chat:k1", "fp", later, now)
    assert (answered.status, answered.reply) == (
        ClaimStatus.ANSWERED,
        {"response": "answered before"},
    )

    # The next message of ann: the dead agent's place is given up, the open dialog goes on.
    place = await store.take_place("ann", later)
    assert place.first or await store.first_in_line(place, now + timedelta(seconds=60))
    start = await store.open_turn("ann", "http_client", 3)
    assert start.dialog.dialog_id == open_.dialog_id
    assert [u.text for u in start.history] == ["answer 1", "message 2", "answer 2"]
    assert start.dialog.bot.attributes == {"seen": 2}
    utterance = HumanUtterance(text="after the upgrade")
    await store.add_utterance(start.dialog.dialog_id, utterance)
    bot = BotUtterance(text="still here", active_skill="echo", confidence=1.0)
    await store.finish_turn(
        start.dialog.dialog_id,
        start.human.id,
        utterance,
        bot,
        {"count": 4},
        {"seen": 3},
        place=place,
    )
    assert await store.rate_utterance("ann", bot.utt_id, 1.0)
    continued = await store.dialog(open_.dialog_id)
    assert continued is not None
    assert [u.text for u in continued.utterances][-3:] == [
        "answer 2",
        "after the upgrade",
        "still here",
    ]
    assert continued.bot.attributes == {"seen": 3}
    assert continued.human.attributes == {"name": "Ann", "count": 4}

    # bob's unanswered utterance is the last of his window, to be answered by a retry.
    place = await store.take_place("bob", later)
    assert place.first or await store.first_in_line(place, now + timedelta(seconds=60))
    bob_start = await store.open_turn("bob", "http_client", 4)
    assert [u.text for u in bob_start.history] == ["hey", "hi bob", "lost one"]
    await store.leave(place)

    assert await store.close_active_dialog("ann") == open_.dialog_id
    assert await store.delete_user("ann")
    assert await store.user_dialogs("ann") is None


async def test_a_sqlite_database_of_the_previous_release(tmp_path: Path) -> None:
    path = tmp_path / "previous.db"
    old = sqlite3.connect(path)
    old.executescript((RELEASES / "0.sqlite.sql").read_text())
    old.close()
    store = await SqliteStore.open(f"sqlite:///{path}")
    try:
        await goes_on_where_it_stopped(store)
    finally:
        await store.close()
    migrated = sqlite3.connect(path)
    try:
        assert migrated.execute("PRAGMA user_version").fetchone()[0] == SQLITE_SCHEMA_VERSION
        # keys kept for ever before expiry existed get a day from the upgrade
        assert migrated.execute(
            "SELECT COUNT(*) FROM idempotency_keys WHERE expires_at IS NULL"
        ).fetchone() == (0,)
        tables = {
            row[0]
            for row in migrated.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    finally:
        migrated.close()
    assert {"idempotency_keys", "lines"} <= tables and not {"messages", "turn_queue"} & tables


async def test_a_mongodb_database_of_the_previous_release(mongodb_url: str) -> None:
    url = fresh_database(mongodb_url)
    dump: dict[str, list[dict[str, Any]]] = json_util.loads(
        (RELEASES / "0.mongodb.json").read_text()
    )
    raw: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url, tz_aware=True)
    try:
        db = raw.get_default_database()
        for name, docs in dump.items():
            await db[name].insert_many(docs)
        store = await MongoStore.open(url)
        try:
            await goes_on_where_it_stopped(store)
        finally:
            await store.close()
        assert await schema_version(db) == SCHEMA_VERSION
        names = set(await db.list_collection_names())
        assert "idempotency_keys" in names and not {"messages", "turn_queue"} & names
        # opening again finds nothing left to do, and changes nothing
        before = await db["users"].find().to_list()
        await (await MongoStore.open(url)).close()
        assert await db["users"].find().to_list() == before
    finally:
        await raw.drop_database(raw.get_default_database().name)
        await raw.close()


async def test_sqlite_keys_from_before_leases_and_fingerprints_keep_their_meaning(
    tmp_path: Path,
) -> None:
    path = tmp_path / "oldest.db"
    old = sqlite3.connect(path)
    old.execute(_OLDEST_MESSAGES)
    old.execute("INSERT INTO messages VALUES ('ann', 'answered', '{\"response\": \"hi\"}')")
    old.execute("INSERT INTO messages VALUES ('ann', 'abandoned', NULL)")
    old.commit()
    old.close()
    store = await SqliteStore.open(f"sqlite:///{path}")
    try:
        now, later = now_and_later()
        answered = await store.claim_key("ann", "answered", "any", later, now)
        assert (answered.status, answered.reply) == (ClaimStatus.ANSWERED, {"response": "hi"})
        # a claim left by an old agent has no lease: it is taken over, and then held
        taken = await store.claim_key("ann", "abandoned", "fp", later, now)
        assert taken.status is ClaimStatus.RECLAIMED
        again = await store.claim_key("ann", "abandoned", "fp", later, now)
        assert again.status is ClaimStatus.IN_FLIGHT
    finally:
        await store.close()


async def test_mongodb_keys_from_before_leases_and_fingerprints_keep_their_meaning(
    mongodb_url: str,
) -> None:
    url = fresh_database(mongodb_url)
    raw: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
    try:
        await raw.get_default_database()["messages"].insert_many(
            [
                {"_id": "3:ann:answered", "user": "ann", "reply": {"response": "hi"}},
                {"_id": "3:ann:abandoned", "user": "ann", "reply": None},
            ]
        )
        store = await MongoStore.open(url)
        try:
            now, later = now_and_later()
            answered = await store.claim_key("ann", "answered", "any", later, now)
            assert (answered.status, answered.reply) == (ClaimStatus.ANSWERED, {"response": "hi"})
            taken = await store.claim_key("ann", "abandoned", "fp", later, now)
            assert taken.status is ClaimStatus.RECLAIMED
            again = await store.claim_key("ann", "abandoned", "fp", later, now)
            assert again.status is ClaimStatus.IN_FLIGHT
            assert await store.delete_user("ann") is False  # no user, but no keys left
            assert await raw.get_default_database()["idempotency_keys"].count_documents({}) == 0
        finally:
            await store.close()
    finally:
        await raw.drop_database(raw.get_default_database().name)
        await raw.close()


async def test_sqlite_rows_bloated_by_escaped_keys_are_repaired(tmp_path: Path) -> None:
    """Releases up to 3 appended a key JSON must escape (``k\\``, a tab) again on every merge, and
    spelled a replaced attribute's non-ASCII key ``\\u00e9``, which the next merge of
    ``é`` did not match either. The upgrade rewrites those rows: one copy of each key, the
    last (as reads took it), and everything reads back as before."""
    path = tmp_path / "bloated.db"
    url = f"sqlite:///{path}"
    store = await SqliteStore.open(url)
    try:
        human = await store.human("ann")
        dialog = await store.active_dialog(human, "http_client")
        await store.human("bob")
    finally:
        await store.close()
    old = sqlite3.connect(path, isolation_level=None)
    # What release 2's merges did, statement for statement.
    old.execute(
        "UPDATE users SET doc = json_set(doc, '$.attributes', json(?)) WHERE user_id = 'ann'",
        [json.dumps({"é": 0, "kept": [1, {"x": None}]})],
    )
    for n in range(1, 6):
        value = json.dumps({"n": n, "text": "x" * 1000})
        for table, prefix, row_id in (
            ("users", "$.attributes", human.id),
            ("dialogs", "$.bot.attributes", dialog.dialog_id),
        ):
            old.execute(
                f"UPDATE {table} SET doc = json_set(doc, ?, json(?), ?, json(?), ?, json(?)) "
                "WHERE id = ?",
                [f'{prefix}."k\\"', value, f'{prefix}."tab\there"', n, f'{prefix}."é"', n, row_id],
            )
    old.execute("PRAGMA user_version = 3")  # the release before the repair
    (bloated,) = old.execute("SELECT doc FROM users WHERE id = ?", [human.id]).fetchone()
    (bob_before,) = old.execute("SELECT doc FROM users WHERE user_id = 'bob'").fetchone()
    old.close()
    assert bloated.count('"k\\\\"') == 5 and len(bloated) > 5000  # the bug, reproduced
    expected = {
        "é": 5,
        "kept": [1, {"x": None}],
        "k\\": {"n": 5, "text": "x" * 1000},
        "tab\there": 5,
    }
    assert Human.model_validate_json(bloated).attributes == expected  # reads took the last

    store = await SqliteStore.open(url)
    try:
        after = await store.open_turn("ann", "http_client", 3)
        assert after.human.attributes == expected
        assert after.dialog.bot.attributes == {k: v for k, v in expected.items() if k != "kept"}
        # and the next merge replaces each key instead of adding a copy
        await store.finish_turn(
            dialog.dialog_id,
            human.id,
            *await _stored_turn(store, dialog.dialog_id),
            {"k\\": 6, "é": 6},
            {},
        )
        assert (await store.human("ann")).attributes == {**expected, "k\\": 6, "é": 6}
    finally:
        await store.close()
    repaired = sqlite3.connect(path)
    try:
        (doc,) = repaired.execute("SELECT doc FROM users WHERE id = ?", [human.id]).fetchone()
        (bob_after,) = repaired.execute("SELECT doc FROM users WHERE user_id = 'bob'").fetchone()
        (dialog_doc,) = repaired.execute(
            "SELECT doc FROM dialogs WHERE id = ?", [dialog.dialog_id]
        ).fetchone()
    finally:
        repaired.close()
    assert len(doc) < 300 and "\\u00e9" not in doc
    assert dialog_doc.count("tab\\t") == 1 and len(dialog_doc) < 1500
    assert bob_after == bob_before  # rows without escapes are not rewritten


async def _stored_turn(store: Store, dialog_id: str) -> tuple[HumanUtterance, BotUtterance]:
    utterance = HumanUtterance(text="after the upgrade")
    await store.add_utterance(dialog_id, utterance)
    return utterance, BotUtterance(text="ok", active_skill="echo", confidence=1.0)


#: What release 1 (SQLite schema 5, MongoDB schema 3) stored with ``group``
#: (:mod:`tests.store.releases.write_release`), as (service, role, dream_group) once read.
RELEASE_1_TRACES = [
    [
        ("tokens", "annotators", None),
        ("greeting", "skills", None),
        ("broken", "skills", None),
        ("confidence", "response_selectors", None),
    ],
    [
        ("skills.eliza", "skills", None),
        ("sentiment.classifier", "services", "sentiment"),
        ("bot_checker", "services", None),
    ],
]
#: Any pipeline: the upgrade is checked through the API, which does not call services.
_PIPELINE = {"services": {"response_selectors": {"pick": {"connector": {"builtin": "all_skills"}}}}}


def _load_release(db_url: str, release: str) -> None:
    """The release's database where ``db_url`` points, as that release left it."""
    if db_url.startswith("sqlite"):
        db = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        db.executescript((RELEASES / f"{release}.sqlite.sql").read_text())
        db.close()
        return
    dump: dict[str, list[dict[str, Any]]] = json_util.loads(
        (RELEASES / f"{release}.mongodb.json").read_text()
    )
    raw: MongoClient[dict[str, Any]] = MongoClient(db_url, tz_aware=True)
    with raw:
        for name, docs in dump.items():
            if docs:
                raw.get_default_database()[name].insert_many(docs)


def _stored_traces(db_url: str) -> list[list[dict[str, Any]]]:
    """Every human utterance's trace as the database holds it, oldest first."""
    if db_url.startswith("sqlite"):
        db = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            rows = db.execute(
                "SELECT json_extract(doc, '$.trace') FROM utterances WHERE speaker = 'human' "
                "ORDER BY seq"
            ).fetchall()
            version = db.execute("PRAGMA user_version").fetchone()[0]
        finally:
            db.close()
        assert version == SQLITE_SCHEMA_VERSION
        return [json.loads(trace) for (trace,) in rows]
    raw: MongoClient[dict[str, Any]] = MongoClient(db_url)
    with raw:
        mongo = raw.get_default_database()
        assert mongo["chorus_meta"].find_one({"_id": "schema"}) == {
            "_id": "schema",
            "version": SCHEMA_VERSION,
        }
        docs = mongo["utterances"].find({"speaker": "human"}).sort("seq", 1)
        return [doc["trace"] for doc in docs]


def _write_old_trace(db_url: str, text: str, trace: list[dict[str, Any]]) -> None:
    """What an agent of release 1 still running beside this one writes: ``group``."""
    if db_url.startswith("sqlite"):
        db = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        with db:
            db.execute(
                "UPDATE utterances SET doc = json_set(doc, '$.trace', json(?)) "
                "WHERE json_extract(doc, '$.text') = ?",
                [json.dumps(trace), text],
            )
        db.close()
        return
    raw: MongoClient[dict[str, Any]] = MongoClient(db_url)
    with raw:
        raw.get_default_database()["utterances"].update_one(
            {"text": text}, {"$set": {"trace": trace}}
        )


def _read_traces(client: httpx.Client) -> list[list[tuple[str, str, str | None]]]:
    response = client.get("/api/user/cat")
    assert response.status_code == 200, response.text
    (dialog,) = response.json()
    return [
        [(c["service"], c["role"], c["dream_group"]) for c in u["trace"]]
        for u in dialog["utterances"]
        if u["speaker"] == "human"
    ]


def test_traces_of_release_1_are_renamed_to_role_and_read_back_through_the_api(
    db_url: str,
    agent: AgentFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SQLite schema 5 and MongoDB schema 3 wrote each traced call's ``group``: the Chorus
    role, or a dp-agent group (``services`` when it had none). The upgrade rewrites them to
    ``role`` (and ``dream_group`` for a group that is no role's name), a batch at a time
    (one utterance per batch here, so that the batches' seams are crossed), and the API,
    the inspector's source, shows them so."""
    monkeypatch.setattr(sqlite_base, "_MIGRATION_BATCH", 1)
    monkeypatch.setattr(mongo_migrations, "_BATCH", 1)
    monkeypatch.setattr(mongo_migrations, "_WRITES_PER_COMMAND", 1)
    _load_release(db_url, "1")
    with caplog.at_level(logging.INFO, logger="chorus.store"):
        client = agent(_PIPELINE)
    assert "migration: 2 traces renamed group to role" in caplog.messages
    assert _read_traces(client) == RELEASE_1_TRACES
    stored = _stored_traces(db_url)
    assert [[(c["service"], c["role"], c["dream_group"]) for c in t] for t in stored] == (
        RELEASE_1_TRACES
    )
    assert not any("group" in call for trace in stored for call in trace)
    assert [c["outcome"] for c in stored[0]] == ["ok", "ok", "error", "ok"]

    # An agent of release 1 still running (a rolling upgrade) writes ``group``: read alike.
    old = [{"service": "sentiment.classifier", "group": "sentiment", "start": 0.0,
            "duration": 0.1, "outcome": "ok", "batch_size": 1}]  # fmt: skip
    _write_old_trace(db_url, "dream turn", old)
    assert _read_traces(client)[1] == [("sentiment.classifier", "services", "sentiment")]
