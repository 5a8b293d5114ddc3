"""Two checkouts' agents under the same load, in alternating rounds: is a change slower?

``make bench`` run once per commit compares two moments of a shared machine, and these
machines drift: the same code measured ten minutes apart differs by half. Here both
agents run at once, each from its own checkout, against one stubs process, and take turns:
a round of each concurrency level for one, then the same for the other, round after round.
Drift falls on both alike. The figures are the medians over rounds of each round's p50
latency and of the agent's own CPU per turn.

With ``--interleave``, a round gives both agents their turns at once, one by one in
alternation: each worker sends a turn to one agent, then the next to the other (who goes
first alternating from turn to turn and from worker to worker), and both agents' CPU is
read over the same seconds. A busy machine's minute-to-minute changes then fall on both
halves of every round, not only on both sides of the median.

    python -m bench.compare --other ../chorus-at-v1.0 [--store sqlite] [--rounds 5] [--interleave]
        [--served]

``--served`` serves both agents as the image does (``python -m agent.api.serve``: uvicorn
with the agent's own HTTP protocol class, its connection limits and its one write of a
reply), where by default uvicorn serves them with its own protocol, as ``make bench`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp

from bench.load import run_load
from bench.ports import free_port
from bench.run import ROOT, clock_ticks, mongodb, process
from bench.stubs import pipeline

#: Turns per round at each concurrency level (the load table's first two levels): enough
#: for the agent's CPU over a round to be a few hundred of the kernel's 10 ms clock ticks,
#: so that one tick more or less is not a step of several percent.
ROUND_TURNS = {1: 240, 8: 240}


@contextlib.contextmanager
def agent(
    root: Path, pipeline_file: Path, db_url: str, served: bool = False
) -> Iterator[tuple[str, int]]:
    """The agent of the checkout at ``root``: its base URL and pid. ``served``: by the
    checkout's ``python -m agent.api.serve``, as the image serves it (uvicorn with the
    agent's own HTTP protocol class and its connection limits), not by uvicorn's own."""
    port = free_port()
    if served:
        # -P: the checkout's packages (PYTHONPATH), not the ones of the directory it runs in
        args = [sys.executable, "-P", "-m", "agent.api.serve"]
        args += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    else:
        # as `chorus serve` makes it: the agent its process's one app (its heap settled)
        args = [sys.executable, "-m", "uvicorn", "--factory", "agent.api.serve:served_app"]
        args += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
        args += ["--no-access-log", "--app-dir", str(root)]
    env = {
        "CHORUS_PIPELINE": str(pipeline_file),
        "CHORUS_DB_URL": db_url,
        "CHORUS_LOG_LEVEL": "WARNING",
        # the checkout's own packages, not this one's
        "PYTHONPATH": str(root),
    }
    with process(args, f"http://127.0.0.1:{port}/ping", env) as proc:
        yield f"http://127.0.0.1:{port}", proc.pid


def one_round(base: str, pid: int, level: int, tag: str) -> tuple[float, float]:
    """p50 latency (ms) and the agent's CPU per turn (ms) of one round."""
    ticks = clock_ticks(pid)
    result = asyncio.run(run_load(f"{base}/", level, ROUND_TURNS[level], tag=tag))
    if result.errors:
        raise SystemExit(f"{tag}: {result.errors} turns failed")
    cpu_s = (clock_ticks(pid) - ticks) / os.sysconf("SC_CLK_TCK")
    return statistics.median(result.latencies) * 1000, 1000 * cpu_s / result.turns


async def _alternating(
    session: aiohttp.ClientSession, urls: list[str], user: str, turns: int, first: int
) -> list[list[float]]:
    """``turns`` turns to each of ``urls``, one to each in turn (``first`` says which
    goes first: it alternates from turn to turn); each side's latencies."""
    latencies: list[list[float]] = [[] for _ in urls]
    for i in range(turns):
        order = range(len(urls)) if (i + first) % 2 == 0 else reversed(range(len(urls)))
        for side in order:
            started = time.perf_counter()
            payload = {"user_id": f"{user}-{i % 10}", "payload": f"hello {i}"}
            async with session.post(urls[side], json=payload) as reply:
                body = await reply.json() if reply.status == 200 else None
            if body is None or body.get("active_skill") == "fallback_response":
                raise SystemExit(f"{user}: a turn of side {side} failed")
            latencies[side].append(time.perf_counter() - started)
    return latencies


def interleaved_round(
    agents: dict[str, tuple[str, int]], level: int, tag: str
) -> dict[str, tuple[float, float]]:
    """Each side's p50 latency (ms) and CPU per turn (ms) over one round in which both
    agents are given their turns at once, one by one in alternation (module docstring)."""
    sides = list(agents)
    urls = [f"{agents[side][0]}/" for side in sides]
    per_worker = max(1, ROUND_TURNS[level] // level)

    async def load() -> list[list[float]]:
        connector = aiohttp.TCPConnector(limit=2 * level + 4)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            done = await asyncio.gather(
                *(
                    _alternating(session, urls, f"{tag}-c{level}-w{w}", per_worker, w)
                    for w in range(level)
                )
            )
        return [[t for worker in done for t in worker[side]] for side in range(len(sides))]

    ticks = [clock_ticks(agents[side][1]) for side in sides]
    latencies = asyncio.run(load())
    figures = {}
    for side, before, times in zip(sides, ticks, latencies, strict=True):
        cpu_s = (clock_ticks(agents[side][1]) - before) / os.sysconf("SC_CLK_TCK")
        figures[side] = (statistics.median(times) * 1000, 1000 * cpu_s / len(times))
    return figures


def compare(
    other: Path,
    db_url_of: Callable[[str, str], str],
    rounds: int,
    interleave: bool = False,
    served: bool = False,
) -> dict[str, Any]:
    sides = {"this": ROOT, "other": other.resolve()}
    stub_port = free_port()
    stubs = [sys.executable, "-m", "bench.stubs", "--port", str(stub_port), "--skills", "3"]
    figures: dict[str, dict[int, list[tuple[float, float]]]] = {
        side: {level: [] for level in ROUND_TURNS} for side in sides
    }
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        pipeline_file = Path(tmp) / "pipeline.json"
        pipeline_file.write_text(json.dumps(pipeline(stub_port, 3)))
        stack.enter_context(process(stubs, f"http://127.0.0.1:{stub_port}/health"))
        agents = {
            side: stack.enter_context(agent(root, pipeline_file, db_url_of(tmp, side), served))
            for side, root in sides.items()
        }
        for side, (base, _) in agents.items():  # warm-up, not counted
            asyncio.run(run_load(f"{base}/", 8, 80, tag=f"{side}-warmup"))
        for number in range(rounds):
            # who goes first alternates too: a round's second half is not always one side's
            order = list(agents) if number % 2 == 0 else list(reversed(agents))
            for level in ROUND_TURNS:
                if interleave:
                    both = interleaved_round(
                        {side: agents[side] for side in order}, level, f"r{number}"
                    )
                    for side in sides:
                        figures[side][level].append(both[side])
                    continue
                for side in order:
                    base, pid = agents[side]
                    figures[side][level].append(one_round(base, pid, level, f"{side}-{number}"))
            print(f"round {number + 1}/{rounds} done", file=sys.stderr, flush=True)
    report: dict[str, Any] = {
        "rounds": rounds,
        "turns_per_round": ROUND_TURNS,
        "interleaved": interleave,
        "served": served,
        "levels": {},
    }
    for level in ROUND_TURNS:
        row: dict[str, Any] = {}
        for side in sides:
            p50s = [p50 for p50, _ in figures[side][level]]
            cpus = [cpu for _, cpu in figures[side][level]]
            row[side] = {
                "p50_ms": round(statistics.median(p50s), 2),
                "cpu_ms_per_turn": round(statistics.median(cpus), 2),
                "p50_ms_per_round": [round(p, 2) for p in p50s],
                "cpu_ms_per_round": [round(c, 2) for c in cpus],
            }
        row["p50_other_over_this"] = round(row["other"]["p50_ms"] / row["this"]["p50_ms"], 3)
        # the rounds of one number ran minutes apart from the next ones, side by side: their
        # ratio is what the machine's drift touches least
        row["cpu_this_over_other_by_round"] = round(
            statistics.median(
                this / other
                for (_, this), (_, other) in zip(
                    figures["this"][level], figures["other"][level], strict=True
                )
            ),
            3,
        )
        report["levels"][level] = row
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other", type=Path, required=True, help="another checkout")
    parser.add_argument("--store", choices=["sqlite", "mongodb"], default="sqlite")
    parser.add_argument("--mongodb-url", default=os.environ.get("MONGODB_URL"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="give both agents each round's turns at once, one by one in alternation",
    )
    parser.add_argument(
        "--served",
        action="store_true",
        help="serve each agent as the image does (python -m agent.api.serve), not by "
        "uvicorn's own HTTP protocol",
    )
    args = parser.parse_args()
    if not (args.other / "agent" / "api" / "app.py").is_file():
        parser.error(f"--other: {args.other} is not a Chorus checkout (no agent/api/app.py)")
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(mongodb(args.mongodb_url)) if args.store == "mongodb" else ""

        def db_url_of(tmp: str, side: str) -> str:
            """Each agent its own database: a file in ``tmp``, or one on the server."""
            if not server:
                return f"sqlite:///{tmp}/{side}.db"
            base, _, query = server.partition("?")
            return f"{base.rsplit('/', 1)[0]}/bench_compare_{side}" + (f"?{query}" if query else "")

        report = compare(args.other, db_url_of, args.rounds, args.interleave, args.served)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
