"""What each shipped service costs in memory and CPU: the figures the chart's per-service
``resources`` come from (docs/deployment.md, "Capacity").

Each service of pipeline.json runs as the chart runs it (deploy/service.Dockerfile: its own
process, ``uvicorn <group>.<name>.app:app``, one worker), on a port of the benchmarks' own
band (:mod:`bench.ports`). Once it answers ``GET /health`` and has sat idle a second, its
resident memory is read from ``/proc`` (idle RSS); then it is sent ``--requests`` calls of
``POST /respond``, ``--concurrency`` at a time, as the agent sends them: a dialog view of
:data:`bench.llm_turns.SCRIPT`'s ordinary conversation, built with
:func:`agent.sdk.testing.view`, as many utterances long as the service's ``context_window``
in pipeline.json, with skills' hypotheses on the last one for the candidate annotators and
the response selectors. Per service:

- idle RSS (MiB): ``VmRSS`` before the first call;
- peak RSS (MiB): ``VmHWM``, the most the process ever held, start-up and load included;
- CPU seconds per 1,000 calls: the process's user + system time over the load;
- p50/p95 latency (ms) of a call, at the client.

The llm skill runs against :mod:`bench.slow_llm` (3 s an answer) at its own endpoint, with
fewer calls (``--llm-requests``): its time is the model's, its memory the open streams'.

    .venv/bin/python -m bench.service_resources                 # every service
    .venv/bin/python -m bench.service_resources --quick --services faq,tokens

The figures go to ``bench/results/service_resources.json`` (``--out`` another folder).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from agent.sdk.testing import hypothesis, view
from bench.llm_turns import SCRIPT, process, wait_up
from bench.ports import free_port
from bench.run import RESULTS

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
TICKS = os.sysconf("SC_CLK_TCK")

#: Hypotheses of the skills, as the candidate annotators and the response selectors get them.
HYPOTHESES = [
    hypothesis("Hi! I'm Chorus.", "greeting", 0.9),
    hypothesis("Chorus is a dialogue agent.", "faq", 0.8),
    hypothesis("I like talking about books.", "smalltalk", 0.6),
    hypothesis("Sorry, I didn't get that.", "fallback", 0.1),
]


@dataclass(frozen=True, slots=True)
class Service:
    """A service of pipeline.json: ``folder`` is ``<group>/<name>`` under the checkout."""

    name: str
    group: str
    folder: str
    context_window: int


@dataclass(frozen=True, slots=True)
class Figures:
    service: str
    group: str
    requests: int
    concurrency: int
    errors: int
    idle_rss_mib: float
    peak_rss_mib: float
    end_rss_mib: float
    cpu_s_per_1000: float
    p50_ms: float
    p95_ms: float


def services(repo: Path) -> list[Service]:
    """The services pipeline.json names, in its order, each from its module's folder."""
    config = json.loads((repo / "pipeline.json").read_text())
    found = []
    for group, entries in config["services"].items():
        for name, entry in entries.items():
            module = entry["connector"]["module"].split(":")[0]
            folder = "/".join(module.split(".")[:2])
            found.append(Service(name, group, folder, int(entry.get("context_window", 1))))
    return found


def status_kib(pid: int, key: str) -> int:
    """A ``key: N kB`` line of ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def dialogs(service: Service, count: int) -> list[dict[str, Any]]:
    """``count`` dialog views of the conversation, as the agent sends ``service`` them."""
    window = max(1, service.context_window)
    hypotheses = (
        HYPOTHESES if service.group in ("candidate_annotators", "response_selectors") else None
    )
    out = []
    for i in range(count):
        end = i % len(SCRIPT) + 1
        texts = SCRIPT[max(0, end - window) : end]
        out.append(view(*texts, hypotheses=hypotheses, dialog_id=f"d{i % 50}"))
    return out


async def drive(
    url: str, bodies: list[dict[str, Any]], concurrency: int
) -> tuple[list[float], int]:
    """POST each body to ``url``, ``concurrency`` at a time: each call's seconds, and errors."""
    queue = list(reversed(bodies))
    times: list[float] = []
    errors = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal errors
        while queue:
            body = queue.pop()
            started = time.perf_counter()
            try:
                response = await client.post(url, json={"dialogs": [body]})
                if response.status_code != 200:
                    errors += 1
            except httpx.HTTPError:
                errors += 1
            times.append(time.perf_counter() - started)

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return times, errors


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


@contextmanager
def slow_llm(env: dict[str, str]) -> Iterator[str]:
    """:mod:`bench.slow_llm` on a port of its own: its OpenAI-compatible base URL."""
    port = free_port()
    args = [sys.executable, "-m", "uvicorn", "bench.slow_llm:app", "--port", str(port)]
    with process([*args, "--host", "127.0.0.1", "--log-level", "warning"], ROOT, env) as llm:
        wait_up(f"http://127.0.0.1:{port}/health", llm)
        yield f"http://127.0.0.1:{port}/v1"


def measure(
    service: Service, repo: Path, env: dict[str, str], requests: int, concurrency: int
) -> Figures:
    port = free_port()
    module = service.folder.replace("/", ".") + ".app:app"
    args = [sys.executable, "-m", "uvicorn", module, "--host", "127.0.0.1", "--port", str(port)]
    with process([*args, "--log-level", "warning"], repo, env) as server:
        wait_up(f"http://127.0.0.1:{port}/health", server)
        time.sleep(1.0)  # let start-up's garbage go before reading the idle figure
        idle = status_kib(server.pid, "VmRSS")
        bodies = dialogs(service, requests)
        cpu_before = cpu_seconds(server.pid)
        times, errors = asyncio.run(drive(f"http://127.0.0.1:{port}/respond", bodies, concurrency))
        cpu = cpu_seconds(server.pid) - cpu_before
        peak = status_kib(server.pid, "VmHWM")
        end = status_kib(server.pid, "VmRSS")
    return Figures(
        service=service.name,
        group=service.group,
        requests=requests,
        concurrency=concurrency,
        errors=errors,
        idle_rss_mib=round(idle / 1024, 1),
        peak_rss_mib=round(peak / 1024, 1),
        end_rss_mib=round(end / 1024, 1),
        cpu_s_per_1000=round(cpu * 1000 / requests, 3),
        p50_ms=round(percentile(times, 0.5) * 1000, 2),
        p95_ms=round(percentile(times, 0.95) * 1000, 2),
    )


def table(rows: list[Figures]) -> None:
    print(
        f"{'service':<12}{'idle MiB':>10}{'peak MiB':>10}{'CPU s/1k':>10}"
        f"{'p50 ms':>9}{'p95 ms':>9}{'errors':>8}"
    )
    for r in rows:
        print(
            f"{r.service:<12}{r.idle_rss_mib:>10.1f}{r.peak_rss_mib:>10.1f}"
            f"{r.cpu_s_per_1000:>10.2f}{r.p50_ms:>9.1f}{r.p95_ms:>9.1f}{r.errors:>8}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--services", default="", help="names to run, comma-separated (all)")
    parser.add_argument("--requests", type=int, default=0, help="calls per service")
    parser.add_argument("--llm-requests", type=int, default=0, help="calls of the llm skill")
    parser.add_argument("--concurrency", type=int, default=8, help="calls in flight")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout to run")
    parser.add_argument(
        "--out",
        type=Path,
        default=RESULTS,
        help="where service_resources.json goes (default: %(default)s)",
    )
    args = parser.parse_args()
    repo = args.repo.resolve()
    chosen = services(repo)
    if args.services:
        wanted = args.services.split(",")
        unknown = set(wanted) - {s.name for s in chosen}
        if unknown:
            parser.error(f"--services: unknown {', '.join(sorted(unknown))}")
        chosen = [s for s in chosen if s.name in wanted]
    requests = args.requests or (40 if args.quick else 3000)
    llm_requests = args.llm_requests or (16 if args.quick else 192)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE_", "LLM_"))}
    env["PYTHONPATH"] = str(repo)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for service in chosen:
        print(f"{service.name}...", file=sys.stderr, flush=True)
        if service.name == "llm":
            with slow_llm(env) as base_url:
                llm_env = {**env, "LLM_BASE_URL": base_url, "LLM_MODEL": "bench"}
                rows.append(
                    measure(service, repo, llm_env, llm_requests, max(args.concurrency, 16))
                )
        else:
            rows.append(measure(service, repo, env, requests, args.concurrency))
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "quick": args.quick,
        "services": [asdict(r) for r in rows],
    }
    (args.out / "service_resources.json").write_text(json.dumps(report, indent=2))
    table(rows)
    print(f"wrote {args.out / 'service_resources.json'}")


if __name__ == "__main__":
    main()
