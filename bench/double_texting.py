"""How long a user's second message waits while a slow turn of theirs runs, by policy.

Two agent processes on one SQLite file (the second message goes to the other replica);
one skill answers "slow" after ``--hold`` seconds and anything else at once. The first
message ("slow") is sent; once the skill has it, the second is sent to the other agent
and timed until its reply: ``enqueue`` waits for the slow turn, ``reject`` is refused at
once, ``interrupt`` cancels the slow turn (noticed by the other replica within about
``INTERRUPT_GRACE`` of the slow turn's start) and is answered.

    .venv/bin/python -m bench.double_texting [--hold 3] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request

from bench.load import median_ms
from bench.ports import free_port
from bench.run import process


def skill(arrived: threading.Event, hold: float) -> FastAPI:
    """A chorus-protocol skill: "slow" is answered after ``hold`` seconds."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[list[dict[str, Any]]]:
        body = await request.json()
        answers = []
        for dialog in body["dialogs"]:
            text = dialog["utterances"][-1]["text"]
            if text == "slow":
                arrived.set()
                await asyncio.sleep(hold)  # the slow skill's work
            answers.append([{"text": f"answer to {text}", "confidence": 0.9}])
        return answers

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def serve_in_thread(app: FastAPI, port: int) -> uvicorn.Server:
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)  # start-up of a server thread, not part of the figures
    return server


def one_round(agents: list[str], arrived: threading.Event, policy: str, user: str) -> float:
    arrived.clear()
    with httpx.Client(timeout=60) as client:
        first = threading.Thread(
            target=client.post,
            args=(f"{agents[0]}/",),
            kwargs={"json": {"user_id": user, "payload": "slow"}},
        )
        first.start()
        assert arrived.wait(30), "the slow message never reached the skill"
        started = time.perf_counter()
        reply = client.post(
            f"{agents[1]}/",
            params={"double_texting": policy},
            json={"user_id": user, "payload": "quick"},
        )
        elapsed = time.perf_counter() - started
        first.join()
    expected = 409 if policy == "reject" else 200
    assert reply.status_code == expected, reply.text
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hold", type=float, default=3.0, help="seconds the slow turn takes")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    arrived = threading.Event()
    skill_port = free_port()
    serve_in_thread(skill(arrived, args.hold), skill_port)
    with tempfile.TemporaryDirectory() as tmp:
        pipeline = Path(tmp) / "pipeline.json"
        pipeline.write_text(
            json.dumps(
                {
                    "services": {
                        "skills": {
                            "slow": {
                                "connector": {
                                    "url": f"http://127.0.0.1:{skill_port}/respond",
                                    "timeout": args.hold + 5,
                                }
                            }
                        }
                    },
                    "turn_timeout": args.hold + 10,
                }
            )
        )
        env = {"CHORUS_PIPELINE": str(pipeline), "CHORUS_DB_URL": f"sqlite:///{tmp}/chorus.db"}
        ports = [free_port(), free_port()]
        agents = [f"http://127.0.0.1:{port}" for port in ports]
        command = [sys.executable, "-m", "agent.api.serve", "--port"]
        with (
            process([*command, str(ports[0])], f"{agents[0]}/ping", env),
            process([*command, str(ports[1])], f"{agents[1]}/ping", env),
        ):
            print(f"second message's wait, slow turn of {args.hold:g}s, {args.rounds} rounds:")
            for policy in ("enqueue", "reject", "interrupt"):
                times = [
                    one_round(agents, arrived, policy, f"{policy}-{n}") for n in range(args.rounds)
                ]
                print(f"  {policy:<10} median {median_ms(times):8.1f} ms")


if __name__ == "__main__":
    main()
