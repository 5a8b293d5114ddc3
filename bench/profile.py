"""Where the agent's CPU goes under load: py-spy samples the agent while ``POST /`` traffic
runs through the stub pipeline of ``make bench``, and the samples are summed by layer.

    .venv/bin/python -m bench.profile                      # SQLite store, concurrency 32
    .venv/bin/python -m bench.profile --store mongodb --seconds 20
    .venv/bin/python -m bench.profile --tracing     # every turn traced, exported over OTLP

Prints the share of samples per layer (the agent's own packages, FastAPI/Starlette,
uvicorn, aiohttp, pydantic, the store's driver, the event loop, ...) and the functions
with the most samples of their own, and writes the raw stacks to
``bench/results/profile-<store>.txt`` (py-spy's collapsed format, which flame-graph tools
read) and the table to ``profile-<store>.json``. The agent's CPU time per turn comes from
``/proc``, so it holds with or without the sampler's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from bench.load import run_load
from bench.ports import free_port
from bench.run import RESULTS, clock_ticks, mongodb, process, stack

#: Layers, first match wins: (name, substrings of a frame's file path or function).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "tracing (OpenTelemetry and its export)",
        (
            "opentelemetry",
            "agent/telemetry/",
            "agent/sdk/tracing",
            "google/protobuf",
            "requests/",
            "urllib3",
        ),
    ),
    ("agent: store", ("agent/store/", "pymongo", "bson", "sqlite3")),
    ("agent: pipeline and connectors", ("agent/pipeline/", "agent/connectors/")),
    ("agent: API, queue, dialogue", ("agent/",)),
    ("HTTP client (aiohttp)", ("aiohttp", "multidict", "yarl")),
    ("FastAPI / Starlette", ("fastapi", "starlette")),
    ("uvicorn / httptools", ("uvicorn", "httptools")),
    ("pydantic", ("pydantic",)),
    ("json", ("json/",)),
    ("event loop (uvloop / asyncio)", ("uvloop", "asyncio")),
)


def layer_of(stack: list[str]) -> str:
    """The layer of the innermost frame that belongs to a known one."""
    for frame in reversed(stack):
        for name, needles in LAYERS:
            if any(needle in frame for needle in needles):
                return name
    return "other (interpreter, stdlib)"


def summarise(raw: str) -> dict[str, object]:
    layers: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        count, stack = int(count_text), stack_text.split(";")
        total += count
        layers[layer_of(stack)] += count
        leaves[stack[-1]] += count
    share = {name: round(100 * n / total, 1) for name, n in layers.most_common()}
    top = [(frame, round(100 * n / total, 1)) for frame, n in leaves.most_common(15)]
    return {"samples": total, "layers_percent": share, "top_self_percent": top}


@contextlib.contextmanager
def sampling(pid: int, seconds: int, out: Path) -> Iterator[None]:
    """py-spy on ``pid`` for ``seconds`` while the block runs."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    proc = subprocess.Popen(
        [
            py_spy,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(seconds),
            "--rate",
            "250",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        if proc.wait(timeout=seconds + 60) != 0:
            raise RuntimeError("py-spy failed: it needs ptrace (root, or CAP_SYS_PTRACE)")


@contextlib.contextmanager
def collector() -> Iterator[dict[str, str]]:
    """bench.otlp_sink on a free port; yields the agent's environment to export to it."""
    port = free_port()
    sink = [sys.executable, "-m", "bench.otlp_sink", "--port", str(port)]
    with process(sink, f"http://127.0.0.1:{port}/stats"):
        yield {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            "OTEL_SERVICE_NAME": "chorus-agent",
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=("sqlite", "mongodb"), default="sqlite")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="trace every turn, exporting OTLP/HTTP to bench.otlp_sink",
    )
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"profile-{args.store}{'-tracing' if args.tracing else ''}"
    raw_path = RESULTS / f"{name}.txt"
    with contextlib.ExitStack() as stacks:
        tmp = stacks.enter_context(tempfile.TemporaryDirectory())
        db_url = (
            f"sqlite:///{tmp}/profile.db"
            if args.store == "sqlite"
            else stacks.enter_context(mongodb(os.environ.get("MONGODB_URL")))
        )
        agent_env = stacks.enter_context(collector()) if args.tracing else {}
        base, pid = stacks.enter_context(stack(db_url, agent_env=agent_env))
        asyncio.run(run_load(f"{base}/", 8, 80, tag="warmup"))
        before = clock_ticks(pid)
        with sampling(pid, args.seconds, raw_path):
            # Enough turns to outlast the sampler; whatever is left runs unsampled.
            result = asyncio.run(
                run_load(
                    f"{base}/",
                    args.concurrency,
                    args.concurrency * 400,
                    tag="profile",
                    deadline=args.seconds,
                )
            )
        cpu_s = (clock_ticks(pid) - before) / os.sysconf("SC_CLK_TCK")
    report = summarise(raw_path.read_text())
    report.update(
        store=args.store,
        tracing=args.tracing,
        concurrency=args.concurrency,
        turns=result.turns,
        turns_per_s=round(result.throughput, 1),
        errors=result.errors,
        agent_cpu_ms_per_turn=round(1000 * cpu_s / max(result.turns, 1), 2),
    )
    (RESULTS / f"{name}.json").write_text(json.dumps(report, indent=2))
    print(
        f"{report['turns']} turns at C={args.concurrency} on {args.store}"
        f"{' with tracing' if args.tracing else ''}: "
        f"{report['turns_per_s']} turns/s, agent CPU {report['agent_cpu_ms_per_turn']} ms "
        f"per turn, {report['samples']} samples"
    )
    for name, percent in report["layers_percent"].items():  # type: ignore[attr-defined]
        print(f"  {percent:5.1f}%  {name}")
    print("most samples of their own:")
    for frame, percent in report["top_self_percent"]:  # type: ignore[attr-defined]
        print(f"  {percent:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
