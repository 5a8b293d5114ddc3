"""How ``chorus telegram`` copes with thousands of updates waiting, and how fast SIGTERM
stops it then.

Starts the stub services and the agent on SQLite (``bench.run.stack``), a local server
speaking the Bot API with ``--updates`` messages waiting, each from its own user, which
sends every waiting update on each ``getUpdates`` whatever its ``limit`` (as an
overloaded or misbehaving server may), and ``chorus telegram`` as a user runs it. Reports
when the first answer arrived, how many were answered within ``--within`` seconds, how
long the bot took to exit after SIGTERM (it is killed after 30 s), and how many updates
it had answered and acknowledged (what a restart would not be sent again) by then.

    .venv/bin/python -m bench.telegram_batch --updates 3000 --within 40
    .venv/bin/python -m bench.telegram_batch --updates 10000 --within 100
    .venv/bin/python -m bench.telegram_batch --tree /tmp/old-checkout   # another version
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bench.double_texting import serve_in_thread
from bench.ports import free_port
from bench.run import ROOT, stack
from bench.servers import sqlite_file

TOKEN = "123456:bench-token"


class WaitingUpdates:
    """The Bot API with ``count`` messages waiting; counts the answers as they come."""

    def __init__(self, count: int) -> None:
        self.updates: list[dict[str, Any]] = [
            {
                "update_id": n + 1,
                "message": {
                    "message_id": n + 1,
                    "from": {"id": 10_000 + n, "is_bot": False, "first_name": "u"},
                    "chat": {"id": 10_000 + n, "type": "private"},
                    "date": 1700000000,
                    "text": "Hello!",
                },
            }
            for n in range(count)
        ]
        self.answered = 0
        self.first_answer: float | None = None
        self.limits: set[Any] = set()
        self.offset = 1  # the highest offset polled: updates before it are acknowledged
        self.lock = threading.Lock()

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/bot{token}/{method}")
        async def call(token: str, method: str, request: Request) -> JSONResponse:
            body = await request.json()
            if method == "getUpdates":
                self.limits.add(body.get("limit"))
                offset = int(body.get("offset", 0))
                self.offset = max(self.offset, offset)
                return JSONResponse(
                    {"ok": True, "result": [u for u in self.updates if u["update_id"] >= offset]}
                )
            with self.lock:
                self.answered += 1
                if self.first_answer is None:
                    self.first_answer = time.perf_counter()
            return JSONResponse({"ok": True, "result": {"message_id": self.answered}})

        return app


def run(updates: int, within: float, tree: Path) -> dict[str, Any]:
    server = WaitingUpdates(updates)
    port = free_port()
    serve_in_thread(server.app(), port)
    with sqlite_file("telegram") as db_url, stack(db_url) as (agent_url, _):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHORUS_TELEGRAM_")}
        env |= {
            "PYTHONPATH": str(tree),
            "CHORUS_TELEGRAM_TOKEN": TOKEN,
            "CHORUS_TELEGRAM_API_URL": f"http://127.0.0.1:{port}",
            "CHORUS_TELEGRAM_AGENT_URL": agent_url,
        }
        started = time.perf_counter()
        bot = subprocess.Popen(
            [sys.executable, "-m", "agent.cli.main", "telegram"],
            env=env,
            cwd=tree,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = started + within
        while time.perf_counter() < deadline and server.answered < updates:
            time.sleep(0.1)  # sampling the count, not synchronising
        all_answered = time.perf_counter() - started if server.answered >= updates else None
        answered = server.answered
        bot.send_signal(signal.SIGTERM)
        term = time.perf_counter()
        try:
            bot.wait(timeout=30)
            exit_s: float | None = time.perf_counter() - term
        except subprocess.TimeoutExpired:
            bot.kill()
            bot.wait()
            exit_s = None
    first = server.first_answer
    return {
        "updates": updates,
        "within_s": within,
        "first_answer_s": None if first is None else round(first - started, 2),
        "answered_within": answered,
        "all_answered_s": None if all_answered is None else round(all_answered, 2),
        "exit_after_sigterm_s": None if exit_s is None else round(exit_s, 2),
        "limits_sent": sorted(str(limit) for limit in server.limits),
        "answered_at_exit": server.answered,
        "acknowledged_at_exit": server.offset - 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=3000)
    parser.add_argument("--within", type=float, default=40.0, help="seconds to wait for answers")
    parser.add_argument(
        "--tree", type=Path, default=ROOT, help="checkout whose chorus telegram is measured"
    )
    args = parser.parse_args()
    print(json.dumps(run(args.updates, args.within, args.tree.resolve())))


if __name__ == "__main__":
    main()
