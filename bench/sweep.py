"""What the data lifecycle's sweep costs: per 10,000 expired utterances, and to the turns
answered while it runs.

1. **Cost.** A store filled with 10,000 utterances in closed dialogs (turns with two
   hypotheses, annotations, a trace and an error each) is swept, one round per rule, a year
   ahead of the clock: compaction, then the expiry of closed dialogs. Printed per rule: the
   round's time, the passes it took, each pass's length and, per pass, the longest time
   the event loop was held at once (median, p90 and max over the passes; in wall-clock
   time and in the loop thread's CPU time, the difference being what other processes took
   of the CPU meanwhile): on SQLite, whose queries run on the loop, the sweep's longest
   step, which is what a turn waits behind.
2. **Turn latency.** The real agent (in this process, services stubbed) answers load
   from 8 concurrent clients, once with no retention setting and once with every rule on, a
   sweep every second (``--interval``), over a store holding another 10,000 expired utterances: turn
   latency p50/p99 of both, and what the sweep removed meanwhile.

    .venv/bin/python bench/sweep.py --sqlite
    .venv/bin/python bench/sweep.py --utterances 2000 --turns 400   # FerretDB, started here
    .venv/bin/python bench/sweep.py --mongodb-url mongodb://127.0.0.1:27017

Writes ``bench/results/sweep-<store>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest.mock import patch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from agent.api.app import create_app  # noqa: E402
from agent.lifecycle import Sweeper  # noqa: E402
from agent.metrics import Metrics  # noqa: E402
from agent.settings import Settings  # noqa: E402
from agent.state.models import (  # noqa: E402
    BotUtterance,
    HumanUtterance,
    Hypothesis,
    ServiceCall,
    ServiceFailure,
    utc_now,
)
from agent.store import Store, open_store  # noqa: E402
from agent.store.base import (  # noqa: E402
    Retention,
    TurnEnd,
)
from bench.load import run_load  # noqa: E402
from bench.servers import mongodb_server, new_database, sqlite_file  # noqa: E402
from bench.stubs import make_app, pipeline  # noqa: E402

UTTERANCES = 10_000
TURNS_PER_DIALOG = 10  # 20 utterances a dialog
YEAR = timedelta(days=365)


async def fill(store: Store, utterances: int, tag: str) -> None:
    """Closed dialogs holding ``utterances`` utterances, each turn with everything
    compaction removes."""
    for d in range(utterances // (2 * TURNS_PER_DIALOG)):
        user = f"{tag}-{d}"
        start = await store.turns.open_turn(user, "http_client", 0)
        human, dialog = start.human, start.dialog
        for t in range(TURNS_PER_DIALOG):
            said = HumanUtterance(text=f"message {t} of {user}")
            await store.turns.add_utterance(dialog.dialog_id, said)
            said.annotations = {"tokens": said.text.split(), "ner": [{"span": "x" * 200}]}
            said.hypotheses = [
                Hypothesis(skill_name=f"skill{k}", text=f"answer {k}", confidence=0.1 * k)
                for k in range(3)
            ]
            said.trace = [
                ServiceCall(service="s", role="skills", start=0, duration=0.01, outcome="ok")
            ]
            said.errors = [ServiceFailure(service="e", kind="timeout", message="slow")]
            answer = BotUtterance(text="answer 2", active_skill="skill2", confidence=0.2)
            await store.turns.finish_turn(TurnEnd(dialog.dialog_id, human.id, said, answer, {}, {}))
        await store.turns.close_active_dialog(user)


class LoopHolds:
    """The longest time anything held the event loop at once since :meth:`take`: a task
    that yields to the loop in a tight loop and notes the longest gap between two of its
    turns (its own share of a gap is microseconds). Both in wall-clock time, which on a
    busy machine includes time the OS gave the CPU to other processes, and in the loop
    thread's CPU time, which is the work done on the loop alone."""

    def __init__(self) -> None:
        self._longest = (0.0, 0.0)
        self._task: asyncio.Task[None] | None = None

    async def _watch(self) -> None:
        last, last_cpu = time.perf_counter(), time.thread_time()
        while True:
            await asyncio.sleep(0)
            now, cpu = time.perf_counter(), time.thread_time()
            if now - last > self._longest[0]:
                self._longest = (now - last, self._longest[1])
            if cpu - last_cpu > self._longest[1]:
                self._longest = (self._longest[0], cpu - last_cpu)
            last, last_cpu = now, cpu

    def __enter__(self) -> LoopHolds:
        self._task = asyncio.get_running_loop().create_task(self._watch())
        return self

    def __exit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()

    async def take(self) -> tuple[float, float]:
        """The longest hold since the last call (ms): wall clock, CPU."""
        await asyncio.sleep(0)
        (wall, cpu), self._longest = self._longest, (0.0, 0.0)
        return wall * 1000, cpu * 1000


def edges(values: list[float], name: str) -> dict[str, float]:
    """Median, p90 and max of ``values`` as ``<name>_median_ms`` and so on."""
    ordered = sorted(values)
    return {
        f"{name}_median_ms": round(statistics.median(ordered), 2),
        f"{name}_p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 2),
        f"{name}_max_ms": round(ordered[-1], 2),
    }


async def round_of(store: Store, retention: Retention, batch: int) -> dict[str, Any]:
    """One round of ``retention``: its time, each pass's length and, per pass, the longest
    the loop was held at once (on SQLite, the sweep's longest step on the loop)."""
    sweeper = Sweeper(
        store.lifecycle,
        retention,
        Metrics(),
        interval=0,
        batch=batch,
        clock=lambda: utc_now() + YEAR,
    )
    passes: list[float] = []
    held: list[float] = []
    held_cpu: list[float] = []
    done, touched = False, 0
    with LoopHolds() as holds:
        await holds.take()
        started = time.perf_counter()
        while not done:
            began = time.perf_counter()
            swept = await sweeper.run_pass()
            passes.append((time.perf_counter() - began) * 1000)
            wall, cpu = await holds.take()
            held.append(wall)
            held_cpu.append(cpu)
            done = swept.round_done
            touched += swept.utterances_deleted + swept.utterances_compacted
        seconds = time.perf_counter() - started
    return {
        "utterances": touched,
        "round_s": round(seconds, 3),
        "passes": len(passes),
        **edges(passes, "pass"),
        **edges(held, "loop_held"),
        **edges(held_cpu, "loop_held_cpu"),
        "passes_holding_over_5ms": sum(1 for h in held if h > 5),
        "passes_holding_over_5ms_cpu": sum(1 for h in held_cpu if h > 5),
    }


async def cost(url: str, batch: int, utterances: int) -> dict[str, Any]:
    store = await open_store(url)
    try:
        await fill(store, utterances, "cost")
        compaction = await round_of(store, Retention(compact_turns=timedelta(days=1)), batch)
        expiry = await round_of(store, Retention(closed_dialogs=timedelta(days=1)), batch)
    finally:
        await store.close()
    per_10000 = UTTERANCES / utterances
    for figures in (compaction, expiry):
        figures["round_s_per_10000"] = round(figures["round_s"] * per_10000, 3)
    return {"batch": batch, "filled": utterances, "compaction": compaction, "expiry": expiry}


def serving(app: Any) -> Any:
    from tests.support.servers import serving as serve

    return serve(app)


async def latency(
    url: str, turns: int, sweeping: bool, interval: float, utterances: int
) -> dict[str, Any]:
    store = await open_store(url)
    try:
        await fill(store, utterances, f"lat{int(sweeping)}")
    finally:
        await store.close()
    second = timedelta(seconds=1)
    rules = (
        Retention(closed_dialogs=second, compact_turns=second, idle_dialogs=3600 * second)
        if sweeping
        else Retention()
    )
    # The agent sweeps every SWEEP_INTERVAL (a minute): the bench as often as asked.
    with (
        tempfile.TemporaryDirectory() as tmp,
        serving(make_app(0.0)) as stubs,
        patch("agent.api.composition.SWEEP_INTERVAL", interval),
    ):
        path = Path(tmp) / "pipeline.json"
        path.write_text(json.dumps(pipeline(stubs.port)))
        app = create_app(Settings(db_url=url, pipeline=path, retention=rules))
        with serving(app) as agent:
            await run_load(agent.url, 8, 60 * 8, tag=f"load{int(sweeping)}")  # warm up
            result = await run_load(agent.url, 8, turns, tag=f"run{int(sweeping)}")
            removed = {}
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"{agent.url}/metrics") as response,
            ):
                for line in (await response.text()).splitlines():
                    if line.startswith("chorus_lifecycle_records_total{"):
                        name, value = line.rsplit(" ", 1)
                        removed[name.split("{", 1)[1].rstrip("}")] = float(value)
    return {**result.summary(), "swept": removed}


@contextmanager
def database(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    if args.sqlite:
        with sqlite_file("sweep") as url:
            yield url, "sqlite"
        return
    with mongodb_server(args.mongodb_url, "sweep") as url:
        yield url, "mongodb" if args.mongodb_url else "ferretdb"


def fresh(url: str) -> str:
    return new_database(url, "chorus_sweep")


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with database(args) as (url, kind):
        result: dict[str, Any] = {"store": kind}
        result["cost"] = await cost(fresh(url), args.batch, args.utterances)
        print(json.dumps(result, indent=2))
        result["without_sweep"] = await latency(
            fresh(url), args.turns, False, args.interval, args.utterances
        )
        result["with_sweep"] = await latency(
            fresh(url), args.turns, True, args.interval, args.utterances
        )
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sqlite", action="store_true", help="measure the embedded store")
    parser.add_argument("--mongodb-url", help="use this server instead of starting FerretDB")
    parser.add_argument("--batch", type=int, default=100, help="SWEEP_BATCH")
    parser.add_argument("--interval", type=float, default=1.0, help="SWEEP_INTERVAL under load")
    parser.add_argument("--turns", type=int, default=2000, help="turns of each load run")
    parser.add_argument(
        "--utterances",
        type=int,
        default=UTTERANCES,
        help="expired utterances stored (FerretDB: fewer, its writes slow down as it fills)",
    )
    arguments = parser.parse_args()
    outcome = asyncio.run(main(arguments))
    print(json.dumps(outcome, indent=2))
    output = ROOT / "bench" / "results" / f"sweep-{outcome['store']}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(outcome, indent=2) + "\n")
    print(f"written to {output}")
