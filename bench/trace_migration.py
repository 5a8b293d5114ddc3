"""How long does the upgrade that renames stored traces' ``group`` to ``role`` take?

SQLite schema 5 -> 6 and MongoDB schema 3 -> 4 rewrite the trace of every human utterance
(docs/storage.md, "Upgrades"), before the agent serves anything. This writes ``--turns``
human utterances with a trace of five calls as the previous release stored them, opens the
store (which migrates) and prints how long opening took, per store, and writes
``bench/results/trace_migration.json``. MongoDB is a FerretDB built by the tests' tooling
unless ``--mongodb-url`` names a server.

    .venv/bin/python -m bench.trace_migration                 # 20,000 turns, both stores
    .venv/bin/python -m bench.trace_migration --turns 100000 --sqlite
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pymongo import AsyncMongoClient

from agent.store.mongo import MongoStore
from agent.store.sqlite import SqliteStore

RESULTS = Path(__file__).resolve().parent / "results"
#: One turn's calls as the previous release traced them: (service, group).
CALLS = [
    ("tokens", "annotators"),
    ("greeting", "skills"),
    ("faq", "skills"),
    ("sentiment.classifier", "sentiment"),
    ("confidence", "response_selectors"),
]


def old_utterance(dialog_id: str, seq: int) -> dict[str, Any]:
    trace = [
        {"service": s, "group": g, "start": 0.01 * i, "duration": 0.02, "outcome": "ok"}
        for i, (s, g) in enumerate(CALLS)
    ]
    return {
        "utt_id": uuid.uuid4().hex,
        "text": f"message {seq}",
        "speaker": "human",
        "trace": [{**call, "batch_size": 1} for call in trace],
        "annotations": {"tokens": ["message", str(seq)]},
        "hypotheses": [],
        "errors": [],
    }


async def sqlite_seconds(turns: int) -> float:
    with tempfile.TemporaryDirectory(prefix="chorus-bench-") as folder:
        url = f"sqlite:///{folder}/bench.db"
        await (await SqliteStore.open(url)).close()  # this release's tables
        db = sqlite3.connect(f"{folder}/bench.db")
        with db:
            db.executemany(
                "INSERT INTO utterances (dialog_id, seq, utt_id, speaker, doc) "
                "VALUES (?, ?, ?, 'human', ?)",
                (
                    (f"d{seq // 100}", seq % 100, doc["utt_id"], json.dumps(doc))
                    for seq in range(turns)
                    for doc in [old_utterance(f"d{seq // 100}", seq)]
                ),
            )
            db.execute("PRAGMA user_version = 5")
        db.close()
        started = time.perf_counter()
        await (await SqliteStore.open(url)).close()
        return time.perf_counter() - started


async def mongodb_seconds(server: str, turns: int) -> float:
    head, sep, options = server.partition("?")
    scheme, rest = head.split("://", 1)
    url = f"{scheme}://{rest.split('/', 1)[0]}/chorus_bench_{uuid.uuid4().hex[:12]}{sep}{options}"
    await (await MongoStore.open(url)).close()
    raw: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
    try:
        db = raw.get_default_database()
        for start in range(0, turns, 1000):
            await db["utterances"].insert_many(
                [
                    {
                        "_id": f"d{seq // 100}-{seq % 100}",
                        "dialog_id": f"d{seq // 100}",
                        "seq": seq % 100,
                        **old_utterance(f"d{seq // 100}", seq),
                    }
                    for seq in range(start, min(start + 1000, turns))
                ]
            )
        await db["chorus_meta"].update_one({"_id": "schema"}, {"$set": {"version": 3}})
        started = time.perf_counter()
        await (await MongoStore.open(url)).close()
        return time.perf_counter() - started
    finally:
        await raw.drop_database(raw.get_default_database().name)
        await raw.close()


@contextmanager
def mongodb(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from tests.support.mongo_server import running_mongodb

    with running_mongodb() as server:
        yield server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--sqlite", action="store_true", help="SQLite only")
    parser.add_argument("--mongodb-url", help="a MongoDB server (default: a FerretDB)")
    args = parser.parse_args()
    result: dict[str, Any] = {"turns": args.turns, "calls_per_trace": len(CALLS)}
    result["sqlite_seconds"] = round(asyncio.run(sqlite_seconds(args.turns)), 3)
    print(f"SQLite 5 -> 6, {args.turns} traces: {result['sqlite_seconds']} s")
    if not args.sqlite:
        with mongodb(args.mongodb_url) as server:
            result["mongodb_seconds"] = round(asyncio.run(mongodb_seconds(server, args.turns)), 3)
        print(f"MongoDB 3 -> 4, {args.turns} traces: {result['mongodb_seconds']} s")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "trace_migration.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
