"""Write the fixture databases of a release: ``python -m tests.store.releases.write_release N``.

Run it with the release's own code checked out, before the change that needs a migration:
it writes, through that release's store, what :mod:`tests.store.test_upgrade` then reads
back with the next one, and dumps it here as ``N.sqlite.sql`` (SQLite's own dump) and
``N.mongodb.json`` (every collection in MongoDB extended JSON). A MongoDB server is needed:
``MONGODB_URL``, else the FerretDB the tests build.

What it writes: user ``cat`` with one dialog of two turns, each with a trace as the
executors wrote it then. The first turn is a Chorus pipeline's (an annotator, a skill, the
built-in response selector, one of them failed); the second a dp-agent pipeline's (a
service of dp-agent's ``skills`` group, one of a group that is no role, ``sentiment``, and a
top-level service).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bson import json_util
from pymongo import AsyncMongoClient

from agent.state.models import BotUtterance, HumanUtterance, ServiceCall
from agent.store import Store
from agent.store.mongo import MongoStore
from agent.store.sqlite import SqliteStore
from tests.conftest import fresh_database
from tests.support.mongo_server import running_mongodb

HERE = Path(__file__).parent

#: (text, answer, the trace's calls as (service, the executor's group, outcome)).
TURNS: list[tuple[str, str, list[tuple[str, str, str]]]] = [
    (
        "built-in turn",
        "built-in answer",
        [
            ("tokens", "annotators", "ok"),
            ("greeting", "skills", "ok"),
            ("broken", "skills", "error"),
            ("confidence", "response_selectors", "ok"),
        ],
    ),
    (
        "dream turn",
        "dream answer",
        [
            ("skills.eliza", "skills", "ok"),
            ("sentiment.classifier", "sentiment", "ok"),
            ("bot_checker", "services", "skipped"),
        ],
    ),
]


def _trace(calls: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """The calls as that release's ``ServiceCall`` has them."""
    fields = ServiceCall.model_fields
    return [
        {
            "service": service,
            ("group" if "group" in fields else "role"): group,
            "start": 0.01 * i,
            "duration": 0.02,
            "outcome": outcome,
            "batch_size": 1,
        }
        for i, (service, group, outcome) in enumerate(calls)
    ]


async def write(store: Store) -> None:
    now = datetime.now(UTC)
    for text, answer, calls in TURNS:
        place = await store.take_place("cat", now + timedelta(seconds=30))
        start = await store.open_turn("cat", "http_client", 4)
        utterance = HumanUtterance.model_validate({"text": text, "trace": _trace(calls)})
        await store.add_utterance(start.dialog.dialog_id, utterance)
        bot = BotUtterance(text=answer, active_skill="greeting", confidence=1.0)
        await store.finish_turn(
            start.dialog.dialog_id, start.human.id, utterance, bot, {}, {}, place=place
        )


async def sqlite_dump() -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "release.db"
        store = await SqliteStore.open(f"sqlite:///{path}")
        try:
            await write(store)
        finally:
            await store.close()
        db = sqlite3.connect(path)
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            lines = [*db.iterdump(), f"PRAGMA user_version = {version};"]
        finally:
            db.close()
    return "\n".join(lines) + "\n"


async def mongodb_dump(server: str) -> str:
    url = fresh_database(server)
    raw: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url, tz_aware=True)
    try:
        store = await MongoStore.open(url)
        try:
            await write(store)
        finally:
            await store.close()
        db = raw.get_default_database()
        names = sorted(await db.list_collection_names())
        dump = {name: await db[name].find().to_list() for name in names}
        return json_util.dumps(dump, indent=1) + "\n"
    finally:
        await raw.drop_database(raw.get_default_database().name)
        await raw.close()


def main(release: str) -> None:
    (HERE / f"{release}.sqlite.sql").write_text(asyncio.run(sqlite_dump()))
    with running_mongodb() as server:
        (HERE / f"{release}.mongodb.json").write_text(asyncio.run(mongodb_dump(server)))


if __name__ == "__main__":
    main(sys.argv[1])
