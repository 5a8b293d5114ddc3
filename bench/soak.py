"""Soak: many users talking at once to the full local stack, then a count of what was kept.

Starts ``chorus run`` (the reference services of pipeline.json and the agent) on a store of
your choice, has ``--users`` users each send ``--turns`` messages one after another (all
users at once), and then checks every user's stored dialog: each message must have its
human and bot utterance, alternating. Prints turns, errors, lost turns and latency, and
writes ``bench/results/soak.json``.

    .venv/bin/python -m bench.soak                          # MongoDB (FerretDB started here)
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
from bench.run import RESULTS, ROOT, free_port, mongodb, process

LINES = ("hello", "my name is Sam", "what is my name?", "tell me something", "ok")


async def user(
    session: aiohttp.ClientSession, url: str, name: str, turns: int, latencies: list[float]
) -> int:
    errors = 0
    for i in range(turns):
        started = time.perf_counter()
        try:
            async with session.post(
                url, json={"user_id": name, "payload": LINES[i % len(LINES)]}
            ) as r:
                ok = r.status == 200 and (await r.json())["active_skill"] != "fallback_response"
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        latencies.append(time.perf_counter() - started)
        errors += not ok
    return errors


def lost_turns(base: str, users: list[str], turns: int) -> tuple[int, int]:
    """Messages without their stored human+bot pair, and dialogs that do not alternate."""
    lost = broken = 0
    with httpx.Client(base_url=base, timeout=60) as client:
        for name in users:
            response = client.get(f"/api/user/{name}")
            utterances = (
                [u for d in response.json() for u in d["utterances"]]
                if response.status_code == 200
                else []
            )
            speakers = [u["speaker"] for u in utterances]
            lost += max(0, turns - speakers.count("bot"))
            broken += speakers != ["human", "bot"] * (len(speakers) // 2)
    return lost, broken


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


async def soak(base: str, users: int, turns: int) -> dict[str, Any]:
    names = [f"soak-{os.getpid()}-{i}" for i in range(users)]
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=users + 4)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=120)
    ) as session:
        started = time.perf_counter()
        progress = asyncio.create_task(report_progress(latencies, users * turns, started))
        errors = await asyncio.gather(
            *(user(session, f"{base}/", n, turns, latencies) for n in names)
        )
        seconds = time.perf_counter() - started
        progress.cancel()
    lost, broken = lost_turns(base, names, turns)
    ordered = sorted(latencies)
    return {
        "users": users,
        "turns_per_user": turns,
        "turns": users * turns,
        "errors": sum(errors),
        "lost_turns": lost,
        "dialogs_out_of_order": broken,
        "seconds": round(seconds, 1),
        "turns_per_s": round(users * turns / seconds, 1),
        "p50_ms": median_ms(latencies),
        "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--db-url", help="default: MongoDB (MONGODB_URL or FerretDB)")
    args = parser.parse_args()
    os.chdir(ROOT)
    with contextlib.ExitStack() as stack:
        db_url = args.db_url or stack.enter_context(mongodb(os.environ.get("MONGODB_URL")))
        os.environ.setdefault("CHORUS_PIPELINE", str(Path(ROOT, "pipeline.json")))
        base = stack.enter_context(local_stack(db_url))
        print(
            f"soaking {args.users} users x {args.turns} turns on {db_url.split('://')[0]}...",
            flush=True,
        )
        report = asyncio.run(soak(base, args.users, args.turns))
    report["store"] = db_url.split("://")[0]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "soak.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
