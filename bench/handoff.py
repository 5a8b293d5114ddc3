"""What a handoff to a person costs and how fast an operator's words reach the user.

Two agent processes on one SQLite file, their services in their own process (the shipped
handoff, greeting and fallback skills). Measured:

* a turn's latency with the pipeline's ``handoff`` section and without it (its one more
  read per turn), over ``--turns`` turns of "Hello!" on one agent;
* an operator's message from the ``POST`` that writes it to the frame on the user's
  WebSocket, written on the user's own agent (which wakes its follower at once) and on the
  other (whose follower finds it at its next look at the store, every ``FOLLOW_POLL``).

    .venv/bin/python -m bench.handoff [--turns 200] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

from bench.load import median_ms
from bench.ports import free_port
from bench.run import process

KEY = "bench-operator-key-0123456789"
OPERATOR = {"X-Operator-Key": KEY, "X-Operator": "bench"}


def pipeline(handoff: bool) -> dict[str, Any]:
    skills = {
        name: {"connector": {"module": f"skills.{name}.app", "timeout": 5.0}}
        for name in ("handoff", "greeting", "fallback")
    }
    config: dict[str, Any] = {
        "services": {
            "skills": skills,
            "response_selectors": {"best": {"connector": {"builtin": "highest_confidence"}}},
        }
    }
    if handoff:
        config["handoff"] = {"unclaimed_after": 3600}
    return config


def turn_latency(agent: str, turns: int, user: str) -> float:
    """The median latency of ``turns`` turns of one user."""
    times = []
    with httpx.Client(base_url=agent, timeout=60) as client:
        for _ in range(turns):
            started = time.perf_counter()
            client.post("/", json={"user_id": user, "payload": "Hello!"}).raise_for_status()
            times.append(time.perf_counter() - started)
    return median_ms(times)


def delivery(user_agent: str, operator_agent: str, rounds: int, user: str) -> float:
    """The median time from an operator's POST (to ``operator_agent``) to the frame on the
    user's WebSocket (at ``user_agent``)."""
    times = []
    url = user_agent.replace("http://", "ws://") + "/chat/ws"
    with connect(url, open_timeout=30) as ws, httpx.Client(timeout=60) as client:
        ws.send(json.dumps({"user_id": user, "payload": "I want to talk to a human"}))
        dialog_id = json.loads(ws.recv(timeout=30))["dialog_id"]
        base = f"{operator_agent}/api/operator/dialogs/{dialog_id}"
        client.post(f"{base}/claim", headers=OPERATOR).raise_for_status()
        for n in range(rounds):
            started = time.perf_counter()
            client.post(
                f"{base}/messages", headers=OPERATOR, json={"text": f"message {n}"}
            ).raise_for_status()
            frame = json.loads(ws.recv(timeout=30))
            times.append(time.perf_counter() - started)
            assert frame["response"] == f"message {n}", frame
        client.post(f"{base}/handback", headers=OPERATOR).raise_for_status()
    return median_ms(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    command = [sys.executable, "-m", "agent.api.serve", "--port"]
    with tempfile.TemporaryDirectory() as tmp:
        for handoff in (False, True):
            path = Path(tmp) / f"pipeline-{handoff}.json"
            path.write_text(json.dumps(pipeline(handoff)))
            env = {
                "CHORUS_PIPELINE": str(path),
                "CHORUS_DB_URL": f"sqlite:///{tmp}/chorus-{handoff}.db",
                "CHORUS_OPERATOR_KEY": KEY,
            }
            ports = [free_port(), free_port()]
            agents = [f"http://127.0.0.1:{port}" for port in ports]
            with (
                process([*command, str(ports[0])], f"{agents[0]}/ping", env),
                process([*command, str(ports[1])], f"{agents[1]}/ping", env),
            ):
                on = "on" if handoff else "off"
                latency = turn_latency(agents[0], args.turns, f"turns-{on}")
                print(f"handoff {on:<3}: turn latency median {latency:7.2f} ms")
                if handoff:
                    same = delivery(agents[0], agents[0], args.rounds, "same")
                    other = delivery(agents[0], agents[1], args.rounds, "other")
                    print(
                        f"  operator's message to the user's WebSocket, same agent  {same:7.1f} ms"
                    )
                    print(
                        f"  operator's message to the user's WebSocket, other agent {other:7.1f} ms"
                    )


if __name__ == "__main__":
    main()
