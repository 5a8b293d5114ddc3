"""`make bench`: the agent's throughput, latency, overhead, flatness, fan-out and memory.

Starts the stub services and the agent as separate processes on 127.0.0.1, on the
embedded store and on MongoDB (``--mongodb-url``, else FerretDB built from tools/ferretdb),
drives them through ``POST /``, prints a table, and writes ``bench/results/bench.json`` and
``bench/results/bench.png``. ``--quick`` runs smaller counts (a smoke test).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.load import LoadResult, median_ms, run_load
from bench.ports import free_port
from bench.servers import mongodb_server
from bench.stubs import pipeline

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {process.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=1).is_success:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready within {timeout}s")


def stop(proc: subprocess.Popen[bytes], grace: float = 15) -> None:
    """End a benchmark's process: SIGTERM, and SIGKILL after ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def process(
    args: list[str], ready_url: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **(env or {})})
    try:
        wait_ready(ready_url, proc)
        yield proc
    finally:
        stop(proc)


@contextlib.contextmanager
def stack(
    db_url: str,
    skills: int = 3,
    delay_ms: float = 0,
    only_skills: bool = False,
    agent_env: dict[str, str] | None = None,
) -> Iterator[tuple[str, int]]:
    """Stubs + agent (with ``agent_env`` added to its environment); yields the agent's base
    URL and its pid."""
    stub_port, agent_port = free_port(), free_port()
    config = pipeline(stub_port, skills)
    if only_skills:
        config["services"] = {"skills": config["services"]["skills"]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pipeline.json"
        path.write_text(json.dumps(config))
        stubs = [
            sys.executable,
            "-m",
            "bench.stubs",
            "--port",
            str(stub_port),
            "--skills",
            str(skills),
            "--delay-ms",
            str(delay_ms),
        ]
        agent = [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "agent.api.app:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(agent_port),
            "--log-level",
            "warning",
            "--no-access-log",
        ]
        env = {
            "CHORUS_PIPELINE": str(path),
            "CHORUS_DB_URL": db_url,
            "CHORUS_LOG_LEVEL": "WARNING",
            **(agent_env or {}),
        }
        with (
            process(stubs, f"http://127.0.0.1:{stub_port}/health"),
            process(agent, f"http://127.0.0.1:{agent_port}/ping", env) as proc,
        ):
            yield f"http://127.0.0.1:{agent_port}", proc.pid


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def clock_ticks(pid: int) -> int:
    """User + system CPU time of a process, in clock ticks (from ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def overhead_ms(base: str, dialog_ids: set[str], latencies: list[float]) -> dict[str, float]:
    """Turn latency minus the services' critical path (per group, the slowest call), from
    the traces the executor stored."""
    critical: list[float] = []
    with httpx.Client(base_url=base, timeout=30) as client:
        for dialog_id in list(dialog_ids)[:50]:
            dialog = client.get(f"/api/dialogs/{dialog_id}", params={"view": "chorus"}).json()
            for utterance in dialog["utterances"]:
                if utterance["speaker"] != "human" or not utterance["trace"]:
                    continue
                slowest: dict[str, float] = {}
                for call in utterance["trace"]:
                    slowest[call["role"]] = max(slowest.get(call["role"], 0.0), call["duration"])
                critical.append(sum(slowest.values()))
    service = median_ms(critical)
    turn = median_ms(latencies)
    return {
        "turn_p50_ms": turn,
        "services_critical_path_p50_ms": service,
        "agent_overhead_p50_ms": round(turn - service, 2),
    }


async def sequential(base: str, user: str, turns: int) -> LoadResult:
    return await run_load(f"{base}/", 1, turns, users_per_worker=1, tag=user)


def skills_side_by_side_ms(base: str, dialog_ids: set[str]) -> dict[str, float]:
    """Per turn, from the stored traces: the time from the first skill's start to the last
    one's end, and the sum of the skills' own times. Side by side, the first is about one
    skill's time; one after another, it is the sum. Both come from the same turn, so a busy
    machine stretches them alike."""
    spans: list[float] = []
    sums: list[float] = []
    with httpx.Client(base_url=base, timeout=30) as client:
        for dialog_id in dialog_ids:
            dialog = client.get(f"/api/dialogs/{dialog_id}", params={"view": "chorus"}).json()
            for utterance in dialog["utterances"]:
                calls = [c for c in utterance.get("trace") or [] if c["role"] == "skills"]
                if utterance["speaker"] != "human" or not calls:
                    continue
                spans.append(
                    max(c["start"] + c["duration"] for c in calls) - min(c["start"] for c in calls)
                )
                sums.append(sum(c["duration"] for c in calls))
    return {"skills_span_p50_ms": median_ms(spans), "skills_sum_p50_ms": median_ms(sums)}


def server_name(db_url: str) -> str:
    """What answers at ``db_url``, for the table and the plot: "SQLite", "MongoDB 8.0.4" or
    "FerretDB v1.24.2" (which speaks MongoDB's protocol but is far slower per command)."""
    if not db_url.startswith("mongodb"):
        return "SQLite"
    from pymongo import MongoClient

    client: MongoClient[dict[str, Any]] = MongoClient(db_url, serverSelectionTimeoutMS=5000)
    try:
        info = client.admin.command("buildInfo")
    finally:
        client.close()
    if "ferretdbVersion" in info:
        return f"FerretDB {info['ferretdbVersion']}"
    return f"MongoDB {info.get('version', '?')}"


@dataclass(frozen=True)
class Counts:
    """How many turns and dialogs each part of the benchmark sends."""

    #: turns sent at 8 users before anything is measured
    warmup: int
    #: turns at each concurrency of the load rows
    load: dict[int, int]
    #: turns of one user one after another (the flatness: its first 20 against its last 20)
    flat: int
    #: dialogs stored when the resident memory is read, then again
    dialogs_small: int
    dialogs_big: int
    #: turns through ten slow skills (the fan-out)
    fan: int


FULL = Counts(
    warmup=80,
    load={1: 100, 8: 400, 32: 800, 64: 1000},
    flat=300,
    dialogs_small=100,
    dialogs_big=10_000,
    fan=30,
)
#: ``--quick``, a smoke test (tests/bench/test_bench.py runs it): every part and figure of
#: the report, with the fewest turns each still measures (40 turns for two sets of 20).
#: A load level runs at least 40 turns: the agent's CPU is read from ``/proc`` in clock
#: ticks (10 ms), and 8 turns of about 1.5 ms each could read as none on a busy machine.
QUICK = Counts(
    warmup=16,
    load={1: 40, 8: 48, 32: 64, 64: 128},
    flat=40,
    dialogs_small=20,
    dialogs_big=120,
    fan=10,
)


def bench_store(name: str, db_url: str, counts: Counts) -> dict[str, Any]:
    out: dict[str, Any] = {"store": name, "server": server_name(db_url)}
    with stack(db_url) as (base, pid):
        asyncio.run(run_load(f"{base}/", 8, counts.warmup, tag="warmup"))
        rows = []
        for level, turns in counts.load.items():
            ticks = clock_ticks(pid)
            result = asyncio.run(run_load(f"{base}/", level, turns, tag=f"{name}"))
            # The agent's own CPU per turn: what a turn costs it, whatever the machine's
            # other processes (stubs, load generator, database) take.
            cpu_s = (clock_ticks(pid) - ticks) / os.sysconf("SC_CLK_TCK")
            rows.append(
                {
                    **result.summary(),
                    "agent_cpu_ms_per_turn": round(1000 * cpu_s / max(result.turns, 1), 2),
                }
            )
            print(f"  {name} C={level}: {rows[-1]}", flush=True)
            if level == 1:
                out["overhead"] = overhead_ms(base, result.dialog_ids, result.latencies)
        out["load"] = rows
        flat_turns = counts.flat
        lat = asyncio.run(sequential(base, f"{name}-flat", flat_turns)).latencies
        first, last = median_ms(lat[:20]), median_ms(lat[-20:])
        out["flatness"] = {
            "turns": flat_turns,
            "first20_p50_ms": first,
            "last20_p50_ms": last,
            "ratio": round(last / first, 3),
        }
        dialogs_small, dialogs_big = counts.dialogs_small, counts.dialogs_big
        asyncio.run(
            run_load(f"{base}/", 16, dialogs_small, users_per_worker=10**6, tag=f"{name}-mem")
        )
        before = rss_mb(pid)
        asyncio.run(
            run_load(
                f"{base}/",
                16,
                dialogs_big - dialogs_small,
                users_per_worker=10**6,
                tag=f"{name}-mem2",
            )
        )
        after = rss_mb(pid)
        out["memory"] = {
            "dialogs_small": dialogs_small,
            "dialogs_big": dialogs_big,
            "rss_small_mb": round(before, 1),
            "rss_big_mb": round(after, 1),
            "growth_mb": round(after - before, 1),
        }
    with stack(db_url, skills=10, delay_ms=100, only_skills=True) as (base, _):
        fan = asyncio.run(sequential(base, f"{name}-fan", counts.fan))
        out["fanout"] = {
            "skills": 10,
            "skill_ms": 100,
            "turn_p50_ms": median_ms(fan.latencies[5:]),
            **skills_side_by_side_ms(base, fan.dialog_ids),
        }
    return out


@contextlib.contextmanager
def mongodb(url: str | None) -> Iterator[str]:
    with mongodb_server(url, "run") as started:
        yield started if url else started.rstrip("/") + "/chorus_bench"


def label(result: dict[str, Any]) -> str:
    """ "sqlite", or "mongodb (FerretDB v1.24.2)": which server the MongoDB figures are of."""
    server = result.get("server", "")
    return result["store"] if server in ("", "SQLite") else f"{result['store']} ({server})"


def plot(results: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot (pip install -e '.[bench]')")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for result in results:
        rows = result["load"]
        conc = [r["concurrency"] for r in rows]
        name = label(result)
        left.plot(conc, [r["turns_per_s"] for r in rows], marker="o", label=name)
        right.plot(conc, [r["p50_ms"] for r in rows], marker="o", label=f"{name} p50")
        right.plot(
            conc, [r["p99_ms"] for r in rows], marker="x", linestyle="--", label=f"{name} p99"
        )
    left.set(
        title="Throughput (7 service calls per turn)",
        xlabel="concurrency",
        ylabel="turns/s",
        xscale="log",
    )
    right.set(title="Turn latency", xlabel="concurrency", ylabel="ms", xscale="log", yscale="log")
    for axis in (left, right):
        axis.legend()
        axis.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def table(results: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    load = Table(title="Load: POST / through 7 stub services")
    for column in (
        "store",
        "C",
        "turns",
        "errors",
        "turns/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "agent CPU ms/turn",
    ):
        load.add_column(column, justify="right")
    for result in results:
        for r in result["load"]:
            load.add_row(
                label(result),
                str(r["concurrency"]),
                str(r["turns"]),
                str(r["errors"]),
                str(r["turns_per_s"]),
                str(r["p50_ms"]),
                str(r["p90_ms"]),
                str(r["p99_ms"]),
                str(r.get("agent_cpu_ms_per_turn", "")),
            )
    other = Table(title="Overhead, flatness, fan-out, memory")
    for column in (
        "store",
        "agent overhead p50",
        "flat last20/first20",
        "10x100ms fan-out",
        "RSS growth",
    ):
        other.add_column(column, justify="right")
    for r in results:
        other.add_row(
            label(r),
            f"{r['overhead']['agent_overhead_p50_ms']} ms (turn {r['overhead']['turn_p50_ms']} ms)",
            f"{r['flatness']['ratio']} ({r['flatness']['first20_p50_ms']} → "
            f"{r['flatness']['last20_p50_ms']} ms)",
            f"{r['fanout']['turn_p50_ms']} ms (skills {r['fanout']['skills_span_p50_ms']} ms "
            f"of {r['fanout']['skills_sum_p50_ms']} ms)",
            f"{r['memory']['growth_mb']} MB ({r['memory']['dialogs_small']} → "
            f"{r['memory']['dialogs_big']} dialogs)",
        )
    console = Console()
    console.print(load)
    console.print(other)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--mongodb-url", default=os.environ.get("MONGODB_URL"))
    parser.add_argument("--stores", default="sqlite,mongodb")
    parser.add_argument(
        "--out",
        type=Path,
        default=RESULTS,
        help="where bench.json and bench.png go (default: %(default)s)",
    )
    args = parser.parse_args()
    unknown = set(args.stores.split(",")) - {"sqlite", "mongodb"}
    if unknown:
        parser.error(f"--stores: unknown {', '.join(sorted(unknown))} (sqlite, mongodb)")
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    stores = args.stores.split(",")
    counts = QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory() as tmp:
        if "sqlite" in stores:
            print("embedded store (SQLite)...", flush=True)
            results.append(bench_store("sqlite", f"sqlite:///{tmp}/bench.db", counts))
        if "mongodb" in stores:
            with mongodb(args.mongodb_url) as url:
                print(f"MongoDB store ({url.split('@')[-1]})...", flush=True)
                results.append(bench_store("mongodb", url, counts))
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "quick": args.quick,
        "results": results,
    }
    (args.out / "bench.json").write_text(json.dumps(report, indent=2))
    plot(results, args.out / "bench.png")
    table(results)
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.png'}")


if __name__ == "__main__":
    main()
