"""How long does the agent's event loop stall while another process holds the SQLite file's
write lock? docs/storage.md allows several agent processes on one file.

A child process takes the write lock (``BEGIN IMMEDIATE``) and holds it for ``--hold``
seconds; meanwhile the store, on this process's loop, writes (``take_place`` of a new user,
what every turn does first) and a ticker measures the longest gap between its 1 ms ticks:
how long every other turn on this loop would wait. Prints that stall and how the write
ended, and writes ``bench/results/sqlite_lock_stall.json``.

    .venv/bin/python -m bench.sqlite_lock_stall               # the lock held 1.5 s
    .venv/bin/python -m bench.sqlite_lock_stall --hold 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.store import open_store

RESULTS = Path(__file__).resolve().parent / "results"

HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
"""


async def measure(path: Path, hold: float) -> dict[str, object]:
    store = await open_store(f"sqlite:///{path}")
    await store.queues.take_place("warm-up", datetime.now(UTC) + timedelta(seconds=30))
    # Started before anything is measured, so its blocking start costs the ticker nothing.
    holder = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-c", HOLDER, str(path), str(hold)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "locked"
    longest = 0.0
    stop = False

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not stop:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)  # the ticker's baseline before the write
    started = time.perf_counter()
    try:
        await store.queues.take_place("writer", datetime.now(UTC) + timedelta(seconds=30))
        outcome = "stored"
    except Exception as exc:  # the store gave up: 503 for a client
        outcome = type(exc).__name__
    waited = time.perf_counter() - started
    stop = True
    await ticking
    holder.wait()
    holder.stdout.close()
    await store.close()
    return {
        "hold_s": hold,
        "write": outcome,
        "write_waited_ms": round(waited * 1000, 1),
        "longest_loop_stall_ms": round(longest * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hold", type=float, default=1.5, help="seconds the lock is held")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure(Path(tmp) / "chorus.db", args.hold))
    print(json.dumps(result))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sqlite_lock_stall.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
