"""Does one user's attribute key that JSON must escape slow everyone down? Row size and latency.

A skill sets ``{"k\\\\": <--kb KB>}`` in one user's attributes on every turn (a key with a
backslash, which JSON spells escaped). That user talks ``--turns`` times while ``--others``
users talk at the same time with plain attributes. Prints the heavy user's stored row
size after the last turn and the other users' median and p99 turn latency over the run,
and writes ``bench/results/escaped_keys.json``. The embedded store (SQLite) is what this
measures: a merge that appends the key again instead of replacing it grows the row by the
value's size every turn, and every turn of that user then parses and rewrites all of it.

    .venv/bin/python -m bench.escaped_keys                  # 40 turns of a 200 KB value
    .venv/bin/python -m bench.escaped_keys --turns 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from bench.load import median_ms
from bench.ports import free_port
from bench.run import RESULTS, ROOT, process

HEAVY = "heavy"
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def skill_app(kb: int) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """A bare ASGI skill: the heavy user's hypothesis sets ``k\\`` to ``kb`` KB (a fresh
    value each turn), everyone else's a small plain attribute."""
    turn = 0

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal turn
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        answers: Any = {"status": "ok"}
        if scope["path"] == "/respond":
            answers = []
            for dialog in json.loads(body)["dialogs"]:
                turn += 1
                heavy = dialog["utterances"][-1]["text"].startswith(
                    HEAVY
                )  # services see no user ids
                value = f"{turn:08d}" + "x" * (kb * 1024) if heavy else turn
                answers.append(
                    [{"text": "ok", "confidence": 1.0, "human_attributes": {"k\\": value}}]
                )
        payload = json.dumps(answers).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    return app


async def talk(
    client: httpx.AsyncClient, user: str, turns: int | None, stop: asyncio.Event
) -> list[float]:
    """One user's turns, one after another; ``turns=None`` talks until ``stop`` is set."""
    latencies: list[float] = []
    n = 0
    while (turns is None and not stop.is_set()) or (turns is not None and n < turns):
        n += 1
        started = time.perf_counter()
        response = await client.post("/", json={"user_id": user, "payload": f"{user}: message {n}"})
        response.raise_for_status()
        latencies.append(time.perf_counter() - started)
    return latencies


async def run(base: str, turns: int, others: int) -> dict[str, Any]:
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        for name in [HEAVY] + [f"other-{i}" for i in range(others)]:  # users exist first
            reply = await client.post("/", json={"user_id": name, "payload": f"{name}: hi"})
            reply.raise_for_status()
        background = [
            asyncio.create_task(talk(client, f"other-{i}", None, stop)) for i in range(others)
        ]
        started = time.perf_counter()
        heavy = await talk(client, HEAVY, turns, stop)
        seconds = time.perf_counter() - started
        stop.set()
        other = [latency for task in background for latency in await task]
    ordered = sorted(other)
    return {
        "heavy_turns": turns,
        "heavy_median_ms": median_ms(heavy),
        "heavy_last_ms": round(heavy[-1] * 1000, 1),
        "other_users": others,
        "other_turns": len(other),
        "other_median_ms": median_ms(other),
        "other_p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 1),
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=40, help="the heavy user's turns")
    parser.add_argument("--kb", type=int, default=200, help="the escaped key's value, KB")
    parser.add_argument("--others", type=int, default=4, help="users talking meanwhile")
    parser.add_argument("--serve-skill", type=int, help=argparse.SUPPRESS)  # the skill's port
    args = parser.parse_args()
    if args.serve_skill:
        uvicorn.run(
            skill_app(args.kb),
            host="127.0.0.1",
            port=args.serve_skill,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        return
    skill_port, agent_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        pipeline = Path(tmp) / "pipeline.json"
        entry = {"connector": {"url": f"http://127.0.0.1:{skill_port}/respond", "timeout": 60}}
        pipeline.write_text(json.dumps({"services": {"skills": {"escaper": entry}}}))
        db = Path(tmp) / "chorus.db"
        env = {
            "CHORUS_DB_URL": f"sqlite:///{db}",
            "CHORUS_PIPELINE": str(pipeline),
            "CHORUS_LOG_LEVEL": "WARNING",
        }
        skill_cmd = [sys.executable, "-m", "bench.escaped_keys", "--serve-skill", str(skill_port)]
        agent_cmd = [sys.executable, "-m", "agent.api.serve", "--port", str(agent_port)]
        with (
            process([*skill_cmd, "--kb", str(args.kb)], f"http://127.0.0.1:{skill_port}/h", {}),
            process(agent_cmd, f"http://127.0.0.1:{agent_port}/ping", env),
        ):
            print(f"{HEAVY}: {args.turns} turns of a {args.kb} KB value under 'k\\\\'", flush=True)
            result = asyncio.run(run(f"http://127.0.0.1:{agent_port}", args.turns, args.others))
        with sqlite3.connect(db) as conn:
            (row,) = conn.execute("SELECT length(doc) FROM users WHERE user_id = ?", [HEAVY])
        result["heavy_row_bytes"] = row[0]
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "escaped_keys.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
