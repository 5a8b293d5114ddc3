"""Ordinary conversations through the shipped pipeline with a slow LLM: how fast the cheap
skills' turns are, how soon and how closely the LLM's answer streams, and how often the
LLM is asked.

The stack runs as a user runs it (``chorus run`` with the checkout's pipeline.json: the
services it names by module in the agent's process, as it ships the reference ones, those
with a URL each its own process, on a port of the benchmarks' own band (:mod:`bench.ports`)
so that a test suite run beside it keeps its ports; the agent on SQLite), with
``LLM_BASE_URL`` pointed at :mod:`bench.slow_llm` (3 s an answer, a piece every 0.3 s), and
a second stack without it (the LLM off) is sent the same turns in step.
Each turn is followed as Server-Sent Events, timed on the machine's monotonic clock,
which the LLM's log shares:

- cheap turns: p50 of message -> answer for the turns a cheap skill answers with the LLM
  on, against the same turns with it off;
- LLM turns: p50/p95 of message -> first token, less the LLM's own time from the request
  to its first piece, split into its two parts (message -> the LLM's request arriving, and
  the LLM's first piece -> the client's first token); the same less what the LLM's own
  server adds for a client calling it directly (its request parsed before its handler's
  clock starts, its piece written after: :func:`direct_overhead`, measured on the same
  endpoint in the same run); and each token's arrival at the client behind the LLM
  sending it;
- LLM requests per conversation of :data:`SCRIPT`'s 20 turns.

Each figure is a p50 with its spread (p25, p75, p95) over ``--conversations`` (10 by
default: 50 LLM turns; 15 made p50s that moved by 5 ms from run to run on a shared
machine), and the run records the machine's load average before and after.

    .venv/bin/python -m bench.llm_turns                       # this checkout
    .venv/bin/python -m bench.llm_turns --conversations 3 --probes 10   # a quicker look
    .venv/bin/python -m bench.llm_turns --repo ../main --label before
    .venv/bin/python -m bench.llm_turns --agent-cost          # the agent's CPU and memory
    .venv/bin/python -m bench.llm_turns --agent-cost --other ../main --blocks 10  # side by side

``--agent-cost`` measures instead what the served agent itself costs, with the LLM off:
its resident memory (``VmRSS`` from ``/proc``) once up and warmed, and after the turns, and
of which its own (``RssAnon``) and files' pages (``RssFile``: the libraries it maps), and
its CPU per cheap turn (:data:`CHEAP`, one after another, each answered by a rule skill;
with ``--fresh`` each text followed by its number, so that none repeats),
the agent process's user and system time from ``/proc`` over ``--turns`` turns; the
figures go to ``bench/results/agent_cost-LABEL.json``.

``--agent-cost --other CHECKOUT --blocks N`` compares two checkouts' served agents the
same way, both up at once and given ``--turns`` cheap turns each in alternating blocks
(who goes first alternates too), so that the machine's load, which moves from minute to
minute, falls on both alike: each block's CPU per turn from ``/proc``, the medians, and
the median of the per-block ratios, and the same over all the blocks' turns together
(``/proc``'s CPU time moves in coarse steps, which a block's figure shows and the whole
run's averages out: docs/performance.md, "Half the CPU"); the figures go to
``bench/results/agent_cost_compare-LABEL.json``.

``--repo`` runs another checkout's agent and services (its pipeline.json) with this
benchmark; the figures go to ``bench/results/llm_turns-LABEL.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.ports import free_port
from bench.run import RESULTS, stop

ROOT = Path(__file__).resolve().parents[1]

#: An ordinary first conversation: greetings, the user's name, small talk, questions the
#: FAQ knows, and a few only an LLM answers well.
SCRIPT = [
    "Hello!",
    "My name is Ann",
    "How are you?",
    "What can you do?",
    "What is Chorus?",
    "Explain why the sky is blue.",
    "What is my name?",
    "Do you like sports?",
    "What do you think about computers?",
    "I'm happy today",
    "Tell me a joke",
    "Thanks!",
    "Who are you?",
    "How does a rainbow form?",
    "What's your favourite book?",
    "Can you recommend a film for tonight?",
    "Why do cats purr?",
    "That's interesting",
    "What is the capital of France?",
    "Goodbye!",
]

#: Turns a rule skill answers, sent in turn by ``--agent-cost``.
CHEAP = ["hi", "thanks", "my name is Ann"]


def cheap_text(number: int, fresh: bool) -> str:
    """The ``number``-th cheap turn's text: one of :data:`CHEAP`, or with ``fresh`` the
    same followed by the number, so no text repeats and the services' answers kept by
    text (docs/performance.md, "Half the CPU") are never found."""
    text = CHEAP[number % len(CHEAP)]
    return f"{text} {number}" if fresh else text


def wait_up(url: str, process: subprocess.Popen[bytes], seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"{url}: the process ended with {process.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    sys.exit(f"{url}: not up within {seconds:.0f}s")


@contextmanager
def process(args: list[str], cwd: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    started = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    try:
        yield started
    finally:
        stop(started, grace=30)


def local_pipeline(repo: Path, folder: Path, speculative: bool) -> tuple[Path, list[str]]:
    """The checkout's pipeline.json with its services that have a URL on free ports (other
    runs may hold the usual ones), and their health URLs; ``speculative``: the LLM skill
    made speculative."""
    config = json.loads((repo / "pipeline.json").read_text())
    health = []
    for entries in config["services"].values():
        for name, entry in entries.items():
            if entry["connector"].get("url"):
                port = free_port()
                entry["connector"]["url"] = f"http://127.0.0.1:{port}/respond"
                if not entry.get("requires_env"):
                    health.append(f"http://127.0.0.1:{port}/health")
            if name == "llm" and speculative:
                entry["speculative"] = True
    path = folder / "pipeline.json"
    path.write_text(json.dumps(config))
    return path, health


def turn(client: httpx.Client, user: str, text: str) -> dict[str, Any]:
    """One message followed as events: when it was sent, each token's arrival, the answer."""
    sent = time.monotonic()
    tokens: list[float] = []
    answer: dict[str, Any] = {}
    name = ""
    with client.stream(
        "POST",
        "/",
        json={"user_id": user, "payload": text},
        headers={"Accept": "text/event-stream"},
    ) as response:
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line.removeprefix("event:").strip()
                if name == "token":
                    tokens.append(time.monotonic())
            elif line.startswith("data:") and name == "answer":
                answer = json.loads(line.removeprefix("data:"))
    return {
        "text": text,
        "sent": sent,
        "answered": time.monotonic(),
        "tokens": tokens,
        "skill": answer.get("active_skill"),
    }


@contextmanager
def stack(repo: Path, llm_url: str | None, speculative: bool) -> Iterator[httpx.Client]:
    """A fresh stack of ``repo`` (``chorus run``, SQLite), the LLM on at ``llm_url`` or off;
    a client to its agent once every service answers."""
    with served(repo, llm_url, speculative) as (client, _):
        yield client


@contextmanager
def served(
    repo: Path, llm_url: str | None, speculative: bool
) -> Iterator[tuple[httpx.Client, int]]:
    """:func:`stack`'s client with the agent's process id (``chorus run`` serves the agent
    and its in-process services itself)."""
    with tempfile.TemporaryDirectory(prefix="chorus-bench-") as tmp:
        port = free_port()
        pipeline, health = local_pipeline(repo, Path(tmp), speculative)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CHORUS_", "LLM_"))} | {
            "PYTHONPATH": str(repo),
            "CHORUS_PIPELINE": str(pipeline),
            "CHORUS_DB_URL": f"sqlite:///{tmp}/chorus.db",
        }
        if llm_url:
            env |= {"LLM_BASE_URL": llm_url, "LLM_MODEL": "bench"}
        command = [sys.executable, "-m", "agent.cli.main", "run", "--port", str(port)]
        with (
            process(command, repo, env) as agent,
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client,
        ):
            for url in health:  # a busy machine may start a service late: all must run
                wait_up(url, agent, 180)
            wait_up(f"http://127.0.0.1:{port}/ready", agent, 120)
            turn(client, "warm-up", "Hello!")
            yield client, agent.pid


def conversations(
    repo: Path, count: int, llm: str, speculative: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``count`` conversations of :data:`SCRIPT` against two stacks of ``repo``, the LLM on
    and off, turn by turn in step (so that the machine's load, which varies, weighs on
    both alike); the LLM-on turns with the LLM requests made during them."""
    with stack(repo, f"{llm}/v1", speculative) as on, stack(repo, None, False) as off:
        seen = len(httpx.get(f"{llm}/log").json())
        with_llm: list[dict[str, Any]] = []
        without: list[dict[str, Any]] = []
        for number in range(count):
            for text in SCRIPT:
                result = turn(on, f"user-{number}", text)
                log = httpx.get(f"{llm}/log").json()
                result["llm_requests"], seen = log[seen:], len(log)
                with_llm.append(result)
                without.append(turn(off, f"user-{number}", text))
        return with_llm, without


def quantiles(values: list[float]) -> dict[str, float | None]:
    """p50 with the spread around it (p25, p75, p95), in ms."""
    if not values:
        return {"p25_ms": None, "p50_ms": None, "p75_ms": None, "p95_ms": None, "n": 0}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return round(ordered[max(round(q * len(ordered)) - 1, 0)] * 1000, 1)

    return {
        "p25_ms": rank(0.25),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p75_ms": rank(0.75),
        "p95_ms": rank(0.95),
        "n": len(ordered),
    }


def direct_overhead(llm: str, probes: int) -> list[float]:
    """What the LLM's server adds to its own time for a client calling it directly, per
    call: the client's request -> first piece, less the handler's own request -> first
    piece (what :func:`figures` takes out of each turn). Uvicorn's parsing before the
    handler's clock starts and the piece's write after it belong to the LLM, not to
    Chorus. Each probe asks for one piece and reads its answer to the end, so that the
    next goes over the same connection, as the LLM skill's requests do (a probe that
    hung up after its first piece opened a new connection each time, whose connect and
    accept were counted as the server's)."""
    body = {
        "model": "bench",
        "stream": True,
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "Explain why the sky is blue."}],
    }
    overhead: list[float] = []
    with httpx.Client(base_url=llm, timeout=30) as client:
        for _ in range(probes + 1):  # the first opens the connection: not counted
            seen = len(client.get("/log").json())
            sent = got = time.monotonic()
            with client.stream("POST", "/v1/chat/completions", json=body) as response:
                for line in response.iter_lines():
                    if line.startswith("data:") and got == sent:
                        got = time.monotonic()
            request = client.get("/log").json()[seen]
            overhead.append((got - sent) - (request["pieces"][0] - request["received"]))
    return overhead[1:]


def figures(
    on: list[dict[str, Any]], off: list[dict[str, Any]], count: int, overhead: list[float]
) -> dict[str, Any]:
    cheap_on = [t["answered"] - t["sent"] for t in on if t["skill"] != "llm"]
    cheap_off = [
        b["answered"] - b["sent"] for a, b in zip(on, off, strict=True) if a["skill"] != "llm"
    ]
    first: list[float] = []
    to_llm: list[float] = []
    from_llm: list[float] = []
    behind: list[float] = []
    answer_ms: list[float] = []
    for t in on:
        if t["skill"] != "llm" or not t["llm_requests"]:
            continue
        answer_ms.append(t["answered"] - t["sent"])
        request = t["llm_requests"][-1]
        if not t["tokens"] or not request["pieces"]:
            continue
        own = request["pieces"][0] - request["received"]
        first.append(t["tokens"][0] - t["sent"] - own)
        to_llm.append(request["received"] - t["sent"])
        from_llm.append(t["tokens"][0] - request["pieces"][0])
        behind += [got - sent for got, sent in zip(t["tokens"], request["pieces"], strict=False)]
    requests = sum(len(t["llm_requests"]) for t in on)
    server = statistics.median(overhead) if overhead else 0.0
    return {
        "conversations": count,
        "turns_per_conversation": len(SCRIPT),
        "cheap_turns_llm_on": quantiles(cheap_on),
        "cheap_turns_llm_off": quantiles(cheap_off),
        "llm_turns_answer": quantiles(answer_ms),
        "llm_first_token_less_llm_own": quantiles(first),
        # its two parts: message -> the LLM's request arrives; first piece -> first token
        "llm_request_after_message": quantiles(to_llm),
        "first_token_after_llm_piece": quantiles(from_llm),
        # the LLM's server's own part of those, as a client calling it directly sees it
        "llm_server_overhead_direct": quantiles(overhead),
        "llm_first_token_behind_direct_client": quantiles([f - server for f in first]),
        "token_behind_llm": quantiles(behind),
        "llm_requests_per_conversation": requests / count,
        "answered_by": {
            text: sorted({t["skill"] for t in on if t["text"] == text}) for text in SCRIPT
        },
    }


def status_mib(pid: int, field: str) -> float:
    """A ``kB`` field of ``/proc/PID/status`` (``VmRSS``, ``VmHWM``) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise LookupError(f"{field} not in /proc/{pid}/status")


def shared_libraries(pid: int) -> int:
    """How many shared libraries (C extensions and what they link) the process maps: each
    adds its pages to the RSS's file part."""
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return len({line.split()[-1] for line in maps if line.endswith(".so") or ".so." in line})


def cpu_seconds(pid: int) -> float:
    """The process's user and system time so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def agent_cost(repo: Path, turns: int, fresh: bool = False) -> dict[str, Any]:
    """The served agent's memory and its CPU per cheap turn (LLM off), one turn at a time
    as JSON, each a new user every :data:`CHEAP` round (a first conversation's turns)."""
    with served(repo, None, False) as (client, pid):
        for number in range(10):  # warm-up: every service's first call is done
            client.post("/", json={"user_id": f"warm-{number}", "payload": CHEAP[number % 3]})
        idle = status_mib(pid, "VmRSS")
        before = cpu_seconds(pid)
        skills: set[str] = set()
        for number in range(turns):
            answer = client.post(
                "/",
                json={
                    "user_id": f"user-{number // len(CHEAP)}",
                    "payload": cheap_text(number, fresh),
                },
            )
            skills.add(answer.raise_for_status().json().get("active_skill", ""))
        spent = cpu_seconds(pid) - before
        return {
            "turns": turns,
            "texts": CHEAP,
            "fresh": fresh,
            "answered_by": sorted(skills),
            "agent_cpu_ms_per_turn": round(1000 * spent / turns, 2),
            "rss_warm_mib": round(idle, 1),
            "rss_after_mib": round(status_mib(pid, "VmRSS"), 1),
            "rss_peak_mib": round(status_mib(pid, "VmHWM"), 1),
            # of which the process's own memory, and pages of files (libraries) it maps
            "rss_anon_mib": round(status_mib(pid, "RssAnon"), 1),
            "rss_file_mib": round(status_mib(pid, "RssFile"), 1),
            "shared_libraries": shared_libraries(pid),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }


def cheap_block(
    client: httpx.Client, pid: int, first: int, turns: int, fresh: bool = False
) -> tuple[float, float]:
    """``turns`` cheap turns from user number ``first // 3`` on: the agent's CPU per turn
    and the p50 of message -> answer, both in ms."""
    before = cpu_seconds(pid)
    took = []
    for number in range(first, first + turns):
        sent = time.perf_counter()
        answer = client.post(
            "/",
            json={"user_id": f"user-{number // len(CHEAP)}", "payload": cheap_text(number, fresh)},
        )
        answer.raise_for_status()
        took.append(time.perf_counter() - sent)
    return 1000 * (cpu_seconds(pid) - before) / turns, 1000 * statistics.median(took)


def agent_cost_compare(
    repo: Path, other: Path, blocks: int, turns: int, fresh: bool = False
) -> dict[str, Any]:
    """Both checkouts' served agents at once, ``turns`` cheap turns each per block, in
    alternation (module docstring)."""
    load_before = [round(x, 2) for x in os.getloadavg()]
    with served(repo, None, False) as this, served(other, None, False) as that:
        sides = {"this": this, "other": that}
        for client, _ in sides.values():  # warm-up: every service's first call is done
            for number in range(30):
                client.post("/", json={"user_id": f"warm-{number}", "payload": CHEAP[number % 3]})
        cpu: dict[str, list[float]] = {side: [] for side in sides}
        p50: dict[str, list[float]] = {side: [] for side in sides}
        for block in range(blocks):
            order = list(sides) if block % 2 == 0 else list(reversed(sides))
            for side in order:
                client, pid = sides[side]
                spent, latency = cheap_block(client, pid, block * turns, turns, fresh)
                cpu[side].append(round(spent, 2))
                p50[side].append(round(latency, 2))
    return {
        "blocks": blocks,
        "turns_per_block": turns,
        "fresh": fresh,
        **{
            side: {
                "agent_cpu_ms_per_turn": round(statistics.median(cpu[side]), 2),
                # every block's turns together: /proc's CPU time moves in coarse steps, which
                # a block's figure shows and the whole run's averages out
                "agent_cpu_ms_per_turn_all_blocks": round(statistics.mean(cpu[side]), 3),
                "p50_ms": round(statistics.median(p50[side]), 2),
                "agent_cpu_ms_per_block": cpu[side],
            }
            for side in cpu
        },
        "cpu_this_over_other_all_blocks": round(sum(cpu["this"]) / sum(cpu["other"]), 3),
        "cpu_this_over_other": round(
            statistics.median(a / b for a, b in zip(cpu["this"], cpu["other"], strict=True)), 3
        ),
        "load_average_before_after": [load_before, [round(x, 2) for x in os.getloadavg()]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument(
        "--probes", type=int, default=30, help="direct calls of the LLM (direct_overhead)"
    )
    parser.add_argument("--label", default="after")
    parser.add_argument("--speculative", action="store_true", help="make the LLM skill speculative")
    parser.add_argument(
        "--agent-cost", action="store_true", help="the agent's memory and CPU per cheap turn"
    )
    parser.add_argument("--turns", type=int, default=600, help="cheap turns for --agent-cost")
    parser.add_argument(
        "--other", type=Path, help="with --agent-cost: a checkout to compare, in alternation"
    )
    parser.add_argument("--blocks", type=int, default=10, help="with --other: blocks of turns")
    parser.add_argument(
        "--fresh", action="store_true", help="with --agent-cost: cheap texts that never repeat"
    )
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    if args.agent_cost and args.other is not None:
        compared = agent_cost_compare(
            repo, args.other.resolve(), args.blocks, max(args.turns // args.blocks, 1), args.fresh
        )
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"agent_cost_compare-{args.label}.json"
        out.write_text(json.dumps(compared, indent=2) + "\n")
        print(json.dumps(compared, indent=2))
        return 0
    if args.agent_cost:
        cost = agent_cost(repo, args.turns, args.fresh)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"agent_cost-{args.label}.json").write_text(json.dumps(cost, indent=2) + "\n")
        print(json.dumps(cost, indent=2))
        return 0
    port = free_port()
    llm = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "uvicorn", "bench.slow_llm:app", "--port", str(port)]
    load_before = [round(x, 2) for x in os.getloadavg()]
    with process([*command, "--log-level", "warning"], ROOT, env) as server:
        wait_up(f"{llm}/health", server)
        on, off = conversations(repo, args.conversations, llm, args.speculative)
        overhead = direct_overhead(llm, args.probes)
    result = figures(on, off, args.conversations, overhead)
    result["load_average_before_after"] = [load_before, [round(x, 2) for x in os.getloadavg()]]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"llm_turns-{args.label}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "answered_by"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
