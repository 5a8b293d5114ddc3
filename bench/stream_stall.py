"""How long a streaming skill's flood of short lines holds other users: ``/ping`` latency
while the agent reads a stream of ``--tokens`` one-character tokens (within the 2 MB answer
limit), as the agent is served (``python -m agent.api.serve``, SQLite).

A local skill answers each call with the whole stream in one body, so the agent finds it
buffered. A thread asks ``/ping`` over one kept-alive connection, again and again, while
``--turns`` turns run one after another; it reports the slowest ping and the 99th
percentile, and writes ``bench/results/stream_stall.json``.

    .venv/bin/python -m bench.stream_stall                  # 130,000 tokens, 4 turns

The agent hands its loop back every ``YIELD_EVERY_LINES`` lines of a stream
(agent/connectors/http.py); before it did, the slowest ping took about as long as parsing
one socket read's worth of lines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent.sdk.streaming import STREAM_MEDIA_TYPE, line
from bench.run import RESULTS
from tests.support.processes import served_agent
from tests.support.servers import serving


def flooding_skill(tokens: int) -> Starlette:
    """A streaming skill whose answer is ``tokens`` one-character tokens, sent at once."""
    body = b"".join(
        [
            line("start", {"confidence": 0.9}),
            *(line("token", "a") for _ in range(tokens)),
            line("end", [{"text": "a" * tokens, "confidence": 0.9}]),
        ]
    )

    async def answer(request: Request) -> Response:
        await request.body()
        return Response(body, media_type=STREAM_MEDIA_TYPE)

    return Starlette(routes=[Route("/", answer, methods=["POST"])])


def pings_while(base: str, running: threading.Event, done: threading.Event) -> list[float]:
    """Seconds each ``/ping`` took while ``running`` was set, until ``done`` is."""
    seconds: list[float] = []
    with httpx.Client(base_url=base, timeout=60) as client:
        while not done.is_set():
            started = time.perf_counter()
            client.get("/ping").raise_for_status()
            if running.is_set():
                seconds.append(time.perf_counter() - started)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=130_000)
    parser.add_argument("--turns", type=int, default=4)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp, serving(flooding_skill(args.tokens)) as skill:
        pipeline = Path(tmp) / "pipeline.json"
        entry = {"connector": {"url": skill.url, "timeout": 120.0}, "stream": True}
        pipeline.write_text(
            json.dumps({"services": {"skills": {"story": entry}}, "turn_timeout": 120.0})
        )
        env = {"CHORUS_PIPELINE": str(pipeline), "CHORUS_DB_URL": f"sqlite:///{tmp}/chorus.db"}
        with served_agent(env) as (port, _):
            base = f"http://127.0.0.1:{port}"
            running, done = threading.Event(), threading.Event()
            result: list[list[float]] = []
            pinger = threading.Thread(
                target=lambda: result.append(pings_while(base, running, done)), daemon=True
            )
            pinger.start()
            turns: list[float] = []
            with httpx.Client(base_url=base, timeout=300) as client:
                for turn in range(args.turns):
                    running.set()
                    started = time.perf_counter()
                    reply = client.post("/", json={"user_id": f"u{turn}", "payload": "Tell"})
                    turns.append(time.perf_counter() - started)
                    running.clear()
                    reply.raise_for_status()
                    assert len(reply.json()["response"]) == args.tokens, reply.text[:200]
            done.set()
            pinger.join(120)
    pings = sorted(result[0])
    figures = {
        "tokens": args.tokens,
        "turns": args.turns,
        "pings_during_turns": len(pings),
        "ping_max_ms": round(pings[-1] * 1000, 1),
        "ping_p99_ms": round(pings[int(len(pings) * 0.99)] * 1000, 1),
        "ping_p50_ms": round(statistics.median(pings) * 1000, 1),
        "turn_p50_ms": round(statistics.median(turns) * 1000, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "stream_stall.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(
        f"{args.tokens} tokens, {args.turns} turns: /ping max {figures['ping_max_ms']} ms, "
        f"p99 {figures['ping_p99_ms']} ms, p50 {figures['ping_p50_ms']} ms "
        f"({len(pings)} pings); turn p50 {figures['turn_p50_ms']} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
