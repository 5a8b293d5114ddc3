"""Soak: many users talking at once to the full local stack, then a count of what was kept.

Starts ``chorus run`` (the reference services of pipeline.json and the agent) on a store of
your choice, has ``--users`` users each send ``--turns`` messages one after another (all
users at once), each with an idempotency key and retried as a client told "retry" would
(a 503, a 409, a broken connection), and then checks every user's stored dialog by those
keys: each message stored once (not lost, not duplicated), in the order sent, each with its
answer, alternating. Prints turns, errors, what was lost, duplicated or out of order, and
latency, and writes ``bench/results/soak.json``.

    .venv/bin/python -m bench.soak                          # MongoDB (FerretDB started here)
    .venv/bin/python -m bench.soak --bulk-write             # FerretDB with MongoDB 8's bulkWrite
    .venv/bin/python -m bench.soak --crash-database         # FerretDB SIGKILLed half-way
    .venv/bin/python -m bench.soak --db-url sqlite:///tmp/soak.db --users 64 --turns 50
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from bench.load import median_ms
from bench.ports import free_port
from bench.run import RESULTS, ROOT, mongodb, process

LINES = ("hello", "my name is Sam", "what is my name?", "tell me something", "ok")


#: How long one message is retried (a 503, a 409, a broken connection) before it counts lost.
PATIENCE = 120.0


async def send(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> int:
    """One message, retried until it is answered (the key makes a retry safe); the number
    of attempts that failed."""
    failed, deadline = 0, time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        try:
            async with session.post(url, json=body) as r:
                if r.status == 200:
                    await r.json()
                    return failed
                if r.status not in (409, 503):
                    return failed + 1
        except (aiohttp.ClientError, TimeoutError):
            pass
        failed += 1
        await asyncio.sleep(0.1)  # a client's back-off
    return failed


async def user(
    session: aiohttp.ClientSession,
    url: str,
    name: str,
    turns: int,
    latencies: list[float],
    half_way: asyncio.Event,
    total: int,
) -> int:
    errors = 0
    for i in range(turns):
        started = time.perf_counter()
        body = {"user_id": name, "payload": LINES[i % len(LINES)], "message_id": f"{name}-{i}"}
        errors += await send(session, url, body)
        latencies.append(time.perf_counter() - started)
        if len(latencies) >= total // 2:
            half_way.set()
    return errors


def read_back(base: str, users: list[str], turns: int) -> dict[str, int]:
    """What the stored dialogs say, by the messages' keys: messages lost, stored more than
    once, out of the order sent, and dialogs that do not alternate human, bot."""
    counts = {"lost_turns": 0, "duplicated": 0, "out_of_order": 0, "dialogs_not_alternating": 0}
    with httpx.Client(base_url=base, timeout=60) as client:
        for name in users:
            response = client.get(f"/api/user/{name}")
            utterances = (
                [u for d in response.json() for u in d["utterances"]]
                if response.status_code == 200
                else []
            )
            sent = [f"chat:{name}-{i}" for i in range(turns)]
            keys = [u.get("message_key") for u in utterances if u["speaker"] == "human"]
            counts["lost_turns"] += len(set(sent) - set(keys))
            counts["duplicated"] += len(keys) - len(set(keys))
            counts["out_of_order"] += list(dict.fromkeys(keys)) != [k for k in sent if k in keys]
            speakers = [u["speaker"] for u in utterances]
            counts["dialogs_not_alternating"] += speakers != ["human", "bot"] * turns
    return counts


@contextlib.contextmanager
def local_stack(db_url: str) -> Iterator[str]:
    port = free_port()
    env = {"CHORUS_DB_URL": db_url, "CHORUS_LOG_LEVEL": "WARNING"}
    with process(
        [sys.executable, "-m", "agent.cli.main", "run", "--port", str(port)],
        f"http://127.0.0.1:{port}/ping",
        env,
    ):
        yield f"http://127.0.0.1:{port}"


async def report_progress(done: list[float], total: int, started: float) -> None:
    """A line every 10 s, so a long soak shows it is moving (and how fast)."""
    while True:
        await asyncio.sleep(10)
        elapsed = time.perf_counter() - started
        print(f"  {len(done)}/{total} turns, {len(done) / elapsed:.1f} turns/s", flush=True)


async def crash_half_way(half_way: asyncio.Event, database: Any) -> None:
    """SIGKILL the database once half the turns are answered, and start it again."""
    await half_way.wait()
    print("  killing the database half-way", flush=True)
    await asyncio.to_thread(database.kill)
    await asyncio.to_thread(database.start)


async def soak(base: str, users: int, turns: int, database: Any = None) -> dict[str, Any]:
    names = [f"soak-{os.getpid()}-{i}" for i in range(users)]
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=users + 4)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=120)
    ) as session:
        started = time.perf_counter()
        progress = asyncio.create_task(report_progress(latencies, users * turns, started))
        half_way, total = asyncio.Event(), users * turns
        crash = [crash_half_way(half_way, database)] if database is not None else []
        talking = asyncio.gather(
            *(user(session, f"{base}/", n, turns, latencies, half_way, total) for n in names)
        )
        await asyncio.gather(talking, *crash)
        errors: list[int] = talking.result()
        seconds = time.perf_counter() - started
        progress.cancel()
    ordered = sorted(latencies)
    return {
        "users": users,
        "turns_per_user": turns,
        "turns": users * turns,
        "failed_attempts": sum(errors),
        **read_back(base, names, turns),
        "seconds": round(seconds, 1),
        "turns_per_s": round(users * turns / seconds, 1),
        "p50_ms": median_ms(latencies),
        "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 1),
    }


@contextlib.contextmanager
def ferretdb(bulk_write: bool) -> Iterator[Any]:
    """A FerretDB of the soak's own (which it may kill), with or without ``-bulk-write``."""
    sys.path.insert(0, str(ROOT))
    from tests.support.mongo_server import running_ferretdb

    with running_ferretdb(bulk_write=bulk_write) as server:
        yield server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--db-url", help="default: MongoDB (MONGODB_URL or FerretDB)")
    parser.add_argument(
        "--bulk-write", action="store_true", help="FerretDB with MongoDB 8's bulkWrite"
    )
    parser.add_argument(
        "--crash-database",
        action="store_true",
        help="SIGKILL the FerretDB started here half-way, and start it again",
    )
    args = parser.parse_args()
    os.chdir(ROOT)
    with contextlib.ExitStack() as stack:
        database = None
        if args.db_url:
            db_url = args.db_url
        elif args.bulk_write or args.crash_database:
            database = stack.enter_context(ferretdb(bulk_write=args.bulk_write))
            db_url = f"{database.url}chorus_soak"
        else:
            db_url = stack.enter_context(mongodb(os.environ.get("MONGODB_URL")))
        os.environ.setdefault("CHORUS_PIPELINE", str(Path(ROOT, "pipeline.json")))
        base = stack.enter_context(local_stack(db_url))
        print(
            f"soaking {args.users} users x {args.turns} turns on {db_url.split('://')[0]}...",
            flush=True,
        )
        crashed = database if args.crash_database else None
        report = asyncio.run(soak(base, args.users, args.turns, crashed))
    report["store"] = db_url.split("://")[0]
    report["bulk_write"] = args.bulk_write
    report["crash_database"] = args.crash_database
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "soak.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
