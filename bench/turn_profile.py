"""What one turn of the agent runs, per turn: cProfile's counts and times, by function.

``bench.profile`` samples the agent with py-spy (shares of the time); this counts. The
stubs of ``make bench`` (7 HTTP calls a turn) and the agent, served as ``bench.compare``
serves it but under cProfile, are started; after a warm-up, ``--turns`` turns at
``--concurrency`` are profiled, and the functions with the most time of their own and
the most time with their callees are printed per turn, each with its calls per turn, and
the totals that say how much a turn does: Python calls, SQLite statements, pydantic
validations and dumps, tasks made.

    .venv/bin/python -m bench.turn_profile [--concurrency 1] [--turns 2000] [--top 15]

The times are cProfile's: wall time, with the profiler's own cost in every call (and a
coroutine's "calls" count each time it resumes), inflated wherever the machine's
scheduler takes the core (a socket write, which wakes the process on the other end,
most of all): read them for order, and the counts for what a change takes off. The
agent's CPU per turn comes from ``/proc`` (under the profiler: higher than without it).
``--out`` keeps the raw profile for ``pstats``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.load import run_load
from bench.ports import free_port
from bench.run import ROOT, clock_ticks, process
from bench.stubs import pipeline

#: What the totals count: built-in methods by name (``<method 'execute' of ...>``), and
#: Python functions by the end of their file's path and their name.
TOTALS: dict[str, tuple[tuple[str, str], ...]] = {
    "SQLite statements": (("~", "execute"),),
    "pydantic validations": (("~", "validate_python"), ("~", "validate_json")),
    "pydantic dumps": (("~", "to_python"), ("~", "to_json")),
    # uvloop's own create_task is not seen by the profiler: asyncio's, and uvicorn's
    # request task
    "tasks made": (("asyncio/tasks.py", "create_task"), ("httptools_impl.py", "_start_asgi_task")),
}
#: Fewer calls a turn than this: not a turn's work (the queue's heartbeat, the interrupt
#: watcher, the loop waiting), left out of the top lists.
PER_TURN = 0.5


def _counts(key: tuple[str, int, str], wanted: tuple[tuple[str, str], ...]) -> bool:
    path, _, function = key
    for where, name in wanted:
        if where == "~" and path == "~" and f"'{name}' of" in function:
            return True
        if where != "~" and path.endswith(where) and function == name:
            return True
    return False


def serve(port: int, out: Path) -> None:
    """The agent under cProfile (``--serve``): SIGUSR1 starts the profiler, SIGUSR2 writes
    what it saw to ``out`` (then ``out`` with ``.done`` added)."""
    import uvicorn

    profiler = cProfile.Profile()

    def start(*_: object) -> None:
        profiler.enable()

    def dump(*_: object) -> None:
        profiler.disable()
        profiler.dump_stats(out)
        out.with_name(out.name + ".done").touch()

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, dump)
    uvicorn.run(
        "agent.api.serve:served_app",
        factory=True,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
    )


def _name(key: tuple[str, int, str]) -> str:
    path, line, function = key
    if path == "~":
        return function
    for prefix in (f"{ROOT}/", "site-packages/", "python3.12/"):
        if prefix in path:
            path = path.split(prefix, 1)[1]
    return f"{path}:{line}({function})"


def report(raw: Path, turns: int, top: int) -> dict[str, Any]:
    """Per turn: the ``top`` functions by own and by cumulative time, and the totals."""
    stats: dict[tuple[str, int, str], Any] = pstats.Stats(str(raw)).stats  # type: ignore[attr-defined]

    def row(key: tuple[str, int, str], value: Any) -> dict[str, Any]:
        _, calls, own, cumulative, _ = value
        return {
            "function": _name(key),
            "calls": round(calls / turns, 2),
            "own_us": round(1e6 * own / turns, 1),
            "cumulative_us": round(1e6 * cumulative / turns, 1),
        }

    each_turn = [item for item in stats.items() if item[1][1] >= PER_TURN * turns]
    by_own = sorted(each_turn, key=lambda item: -item[1][2])[:top]
    by_cumulative = sorted(each_turn, key=lambda item: -item[1][3])[:top]
    totals = {"Python calls (with the built-ins)": sum(v[1] for v in stats.values()) / turns}
    for label, names in TOTALS.items():
        totals[label] = sum(v[1] for k, v in stats.items() if _counts(k, names)) / turns
    return {
        "turns": turns,
        "by_own": [row(k, v) for k, v in by_own],
        "by_cumulative": [row(k, v) for k, v in by_cumulative],
        "totals_per_turn": {label: round(count, 2) for label, count in totals.items()},
    }


def profile(level: int, turns: int, raw: Path) -> float:
    """Profile ``turns`` turns at concurrency ``level`` into ``raw``; the agent's CPU per
    turn (ms, from ``/proc``, profiler included)."""
    with tempfile.TemporaryDirectory() as tmp:
        stub_port, agent_port = free_port(), free_port()
        config = Path(tmp) / "pipeline.json"
        config.write_text(json.dumps(pipeline(stub_port, 3)))
        stubs = [sys.executable, "-m", "bench.stubs", "--port", str(stub_port), "--skills", "3"]
        served = [sys.executable, "-m", "bench.turn_profile", "--serve", str(agent_port)]
        served += ["--out", str(raw)]
        env = {
            "CHORUS_PIPELINE": str(config),
            "CHORUS_DB_URL": f"sqlite:///{tmp}/chorus.db",
            "CHORUS_LOG_LEVEL": "WARNING",
        }
        base = f"http://127.0.0.1:{agent_port}"
        with (
            process(stubs, f"http://127.0.0.1:{stub_port}/health"),
            process(served, f"{base}/ping", env) as agent,
        ):
            asyncio.run(run_load(f"{base}/", 8, 160, tag="warmup"))
            done = raw.with_name(raw.name + ".done")
            done.unlink(missing_ok=True)
            os.kill(agent.pid, signal.SIGUSR1)
            ticks = clock_ticks(agent.pid)
            result = asyncio.run(run_load(f"{base}/", level, turns, tag="profiled"))
            cpu_s = (clock_ticks(agent.pid) - ticks) / os.sysconf("SC_CLK_TCK")
            os.kill(agent.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 60
            while not done.exists():
                if time.monotonic() > deadline:
                    raise SystemExit("the agent wrote no profile")
                time.sleep(0.05)
            done.unlink()
        if result.errors:
            raise SystemExit(f"{result.errors} turns failed")
    return 1000 * cpu_s / result.turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--out", type=Path, help="where the raw profile is kept")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        raw = args.out or Path(tmp) / "turns.prof"
        cpu_ms = profile(args.concurrency, args.turns, raw)
        figures = report(raw, args.turns, args.top)
    figures["concurrency"] = args.concurrency
    figures["agent_cpu_ms_per_turn_profiled"] = round(cpu_ms, 2)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
