"""Chorus beside DeepPavlov Agent on the same harness: the agent's CPU per turn and p50.

The agents run at once against one ``bench/stubs.py`` process (``make bench``'s 7 calls a
turn: 2 annotators, a skill selector, 3 skills, a response selector, all over HTTP), and
the load of ``bench/load.py`` (``POST /`` with ``user_id`` and ``payload``, dp-agent's
API, which Chorus serves too) goes to each in alternating rounds, as in
``bench/compare.py``: a round of each concurrency level for one agent, then the next,
the order rotating from round to round, so that a shared machine's drift falls on all
alike. The sides:

- ``chorus-sqlite``: this checkout's agent on an SQLite file;
- ``chorus-mongodb``: the same on MongoDB (``--mongodb-url``, else the FerretDB
  ``tools/ferretdb`` builds);
- ``dp-agent``: DeepPavlov Agent at cea048e, the commit Dream's agent image installs,
  with its shipped settings (``ExtendedStateManager``, the HTTP channel, the debug output
  formatter, the response logger), on the same MongoDB server. Its ``pipeline_conf.json``
  is written here, naming the same stub services (``pipeline_conf``).

dp-agent is installed, never committed, in a scratch virtual environment
(``.cache/dp-agent/venv``, reused once built) for Python 3.7, the Python of Dream's agent
image, from PyPI with the pins of its own requirements.txt (aiohttp 3.6, motor 2.0,
pymongo 3.10) and the requests Dream's image adds; ``--python`` names the interpreter
(default: pyenv's 3.7, else ``python3.7`` on the PATH), ``--package`` another source of
the same commit (a local clone: ``--package /path/to/dp-agent``).

Figures: per side and level, the medians over rounds of the round's p50 and of the
agent's CPU per turn (the agent process's clock ticks over the round / its turns, from
``/proc``), the agent's resident memory at the end, and the load average during the
rounds. Each round also counts the stubs' calls (``GET /calls``) against the 7 a turn
owes them (each service once; the two annotators share a path) and the turns that ended
in a fallback answer, and reports both: dp-agent's answers come from the stubs, and the
figures say how many calls, if any, it gave up.

    python -m bench.dp_agent [--rounds 4] [--mongodb-url URL] [--python python3.7]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.compare import ROUND_TURNS, agent
from bench.load import run_load
from bench.ports import free_port
from bench.run import RESULTS, ROOT, clock_ticks, mongodb, process, rss_mb, stop, wait_ready
from bench.stubs import ANNOTATORS, pipeline

#: The commit Dream's agent image installs (2.3.0a; no package of it on PyPI).
PACKAGE = "git+https://github.com/deeppavlov/dp-agent@cea048eb2c421649a534321dd570dc52e90da0b7"
VENV = ROOT / ".cache" / "dp-agent" / "venv"
#: What Dream's agent image installs beside it that it imports (its Telegram channel,
#: imported by ``deeppavlov_agent.run`` whatever the channel, needs requests; its
#: requirements.txt does not name it).
BESIDE = ("requests==2.24.0",)
#: The dialog formatter of every service, in dp-agent's ``module:function`` form.
FORMATTER = "bench.dp_agent_formatters:last_utterances"
#: What dp-agent's last-chance service answers as ``active_skill``: a turn that ends in it
#: failed.
LAST_CHANCE = "last_chance_service"
#: The calls each turn must make at the stubs, by path.
CALLS_PER_TURN = {
    "/annotate": len(ANNOTATORS),
    "/select_skills": 1,
    **{f"/skill/{i}": 1 for i in (1, 2, 3)},
}
SELECTOR_PATH = {"dp-agent": "/select_response/dp_agent"}


def pipeline_conf(stub_port: int, timeout: float = 5.0) -> dict[str, Any]:
    """dp-agent's pipeline_conf.json for the services of ``bench.stubs.pipeline``, laid out
    as Dream's is (annotators, then the skill selector, the skills, the response selector;
    a last-chance and a timeout service answering canned text)."""
    base = f"http://127.0.0.1:{stub_port}"

    def service(path: str, method: str | None, after: list[str]) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "connector": {"protocol": "http", "timeout": timeout, "url": f"{base}{path}"},
            "dialog_formatter": FORMATTER,
            "previous_services": after,
        }
        if method:
            entry["state_manager_method"] = method
        return entry

    def canned(text: str, tag: str) -> dict[str, Any]:
        return {
            "connector": {
                "protocol": "python",
                "class_name": "PredefinedTextConnector",
                "response_text": text,
                "annotations": {},
            },
            "state_manager_method": "add_bot_utterance_last_chance",
            "tags": [tag],
        }

    stubs = pipeline(stub_port)["services"]
    selector = {**service("/select_skills", None, ["annotators"]), "tags": ["selector"]}
    return {
        "services": {
            "last_chance_service": canned("Sorry, something went wrong.", "last_chance"),
            "timeout_service": canned("Sorry, I need to think more.", "timeout"),
            "annotators": {
                name: service("/annotate", "add_annotation", []) for name in stubs["annotators"]
            },
            "skill_selectors": {name: selector for name in stubs["skill_selectors"]},
            "skills": {
                name: service(f"/skill/{i}", "add_hypothesis", ["skill_selectors"])
                for i, name in enumerate(stubs["skills"], start=1)
            },
            "response_selectors": {
                name: service(SELECTOR_PATH["dp-agent"], "add_bot_utterance", ["skills"])
                for name in stubs["response_selectors"]
            },
        }
    }


def python_37(given: str | None) -> str:
    """The interpreter the scratch environment is made with: ``given``, else the first
    Python 3.7 that runs (a pyenv shim on the PATH may not)."""
    if given:
        return given
    pyenv = sorted((Path.home() / ".pyenv" / "versions").glob("3.7*/bin/python"), reverse=True)
    for candidate in [*map(str, pyenv), shutil.which("python3.7")]:
        version = [candidate or "", "-c", "import sys; assert sys.version_info[:2] == (3, 7)"]
        if candidate and subprocess.run(version, capture_output=True).returncode == 0:
            return candidate
    sys.exit("dp_agent: no Python 3.7 found: pass --python (dp-agent's aiohttp 3.6 needs 3.7)")


def scratch_python(venv: Path, interpreter: str, package: str) -> Path:
    """dp-agent in ``venv`` with the pins of its requirements.txt, made once."""
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import deeppavlov_agent.run"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(f"installing dp-agent ({package}) into {venv} ...", file=sys.stderr, flush=True)
    subprocess.run([interpreter, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, package, *BESIDE], check=True)
    subprocess.run(check, check=True)
    return python


@contextlib.contextmanager
def dp_agent(python: Path, tmp: Path, stub_port: int, server: str) -> Iterator[tuple[str, int]]:
    """dp-agent's HTTP channel, as Dream starts it (``python -m deeppavlov_agent.run`` with
    the pipeline and database named on the command line): its base URL and pid."""
    port = free_port()
    conf = tmp / "pipeline_conf.json"
    conf.write_text(json.dumps(pipeline_conf(stub_port), indent=1))
    database = f"dp_agent_bench_{stub_port}"
    db_conf = tmp / "db_conf.json"
    db_conf.write_text(json.dumps({"host": server, "port": 27017, "name": database}))
    args = [str(python), "-m", "deeppavlov_agent.run", f"agent.port={port}"]
    args += [f"agent.pipeline_config={conf}", f"agent.db_config={db_conf}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the formatter's module, from this checkout
    log_path = tmp / "dp-agent.log"  # it logs to stdout, as in Dream
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(f"http://127.0.0.1:{port}/ping", proc)
        except RuntimeError:
            proc.kill()
            sys.stderr.write(log_path.read_text(errors="replace")[-4000:])
            raise
        try:
            yield f"http://127.0.0.1:{port}", proc.pid
        finally:
            stop(proc)


def calls(stub_base: str) -> Counter[str]:
    return Counter(httpx.get(f"{stub_base}/calls", timeout=10).json())


def one_round(
    side: str, base: str, pid: int, level: int, tag: str, stub_base: str
) -> dict[str, float]:
    """One round: its p50 (ms), the agent's CPU per turn (ms), the turns that failed (a
    fallback answer or none) and the service calls a turn owed the stubs and did not make
    (a call given up at its timeout before it was sent: dp-agent then answers without
    that skill)."""
    before, ticks = calls(stub_base), clock_ticks(pid)
    fallback = LAST_CHANCE if side == "dp-agent" else "fallback_response"
    result = asyncio.run(
        run_load(f"{base}/", level, ROUND_TURNS[level], tag=tag, fallback=fallback)
    )
    cpu_s = (clock_ticks(pid) - ticks) / os.sysconf("SC_CLK_TCK")
    made = calls(stub_base)
    made.subtract(before)
    selector = SELECTOR_PATH.get(side, "/select_response")
    owed = Counter({path: n * result.turns for path, n in {**CALLS_PER_TURN, selector: 1}.items()})
    missing, extra = owed - +made, +made - owed
    if missing or extra or result.errors:
        print(
            f"{tag}: {result.errors} turns failed, calls missing {dict(missing)}, "
            f"unexpected {dict(extra)}",
            file=sys.stderr,
        )
    return {
        "p50_ms": statistics.median(result.latencies) * 1000,
        "cpu_ms_per_turn": 1000 * cpu_s / result.turns,
        "turns": result.turns,
        "failed_turns": result.errors,
        "calls_missing": sum(missing.values()) + sum(extra.values()),
    }


Figures = dict[str, dict[int, list[dict[str, float]]]]


def summary(figures: Figures, loads: list[float], rss: dict[str, float]) -> dict[str, Any]:
    """Per level and side, the medians over rounds (and each round's figure); the ratio of
    dp-agent's CPU per turn to each Chorus side's."""
    report: dict[str, Any] = {
        "rounds": len(loads),
        "turns_per_round": ROUND_TURNS,
        "stub_calls_per_turn": sum(CALLS_PER_TURN.values()) + 1,
        "load_average_1min": {
            "min": min(loads),
            "median": statistics.median(loads),
            "max": max(loads),
        },
        "rss_mb": rss,
        "levels": {},
    }
    for level in ROUND_TURNS:
        row: dict[str, Any] = {}
        for side, by_level in figures.items():
            rows = by_level[level]
            row[side] = {
                key: round(statistics.median(r[key] for r in rows), 2)
                for key in ("p50_ms", "cpu_ms_per_turn")
            }
            for key in ("p50_ms", "cpu_ms_per_turn"):
                row[side][f"{key}_per_round"] = [round(r[key], 2) for r in rows]
            for key in ("turns", "failed_turns", "calls_missing"):
                row[side][key] = int(sum(r[key] for r in rows))
        dp_cpu = row["dp-agent"]["cpu_ms_per_turn"]
        row["dp_agent_cpu_over"] = {
            side: round(dp_cpu / row[side]["cpu_ms_per_turn"], 2)
            for side in figures
            if side != "dp-agent"
        }
        # the same in each round (both sides measured within a minute of each other)
        row["dp_agent_cpu_over_median_of_rounds"] = {
            side: round(
                statistics.median(
                    dp["cpu_ms_per_turn"] / other["cpu_ms_per_turn"]
                    for dp, other in zip(
                        figures["dp-agent"][level], figures[side][level], strict=True
                    )
                ),
                2,
            )
            for side in figures
            if side != "dp-agent"
        }
        report["levels"][level] = row
    return report


def compare(python: Path, server: str, rounds: int, out: Path) -> dict[str, Any]:
    """The three sides in alternating rounds; the report is written to ``out`` after each
    round (a long run stopped early keeps what it measured)."""
    stub_port = free_port()
    stub_base = f"http://127.0.0.1:{stub_port}"
    stubs = [sys.executable, "-m", "bench.stubs", "--port", str(stub_port), "--skills", "3"]
    figures: Figures = {}
    loads: list[float] = []
    report: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-dp-agent-") as name,
        contextlib.ExitStack() as stack,
    ):
        tmp = Path(name)
        pipeline_file = tmp / "pipeline.json"
        pipeline_file.write_text(json.dumps(pipeline(stub_port, 3)))
        stack.enter_context(process(stubs, f"{stub_base}/health"))
        head, _, query = server.partition("?")
        chorus_mongodb = f"{head.rstrip('/').rsplit('/', 1)[0]}/bench_dp_chorus_{stub_port}"
        agents = {
            "chorus-sqlite": stack.enter_context(
                agent(ROOT, pipeline_file, f"sqlite:///{tmp}/chorus.db")
            ),
            "chorus-mongodb": stack.enter_context(
                agent(ROOT, pipeline_file, chorus_mongodb + (f"?{query}" if query else ""))
            ),
            "dp-agent": stack.enter_context(dp_agent(python, tmp, stub_port, server)),
        }
        sides = list(agents)
        for side, (base, pid) in agents.items():  # warm-up, not counted
            one_round(side, base, pid, 8, f"{side}-warmup", stub_base)
            figures[side] = {level: [] for level in ROUND_TURNS}
        for number in range(rounds):
            order = sides[number % len(sides) :] + sides[: number % len(sides)]
            for level in ROUND_TURNS:
                for side in order:
                    base, pid = agents[side]
                    figures[side][level].append(
                        one_round(side, base, pid, level, f"{side}-{number}", stub_base)
                    )
            loads.append(os.getloadavg()[0])
            rss = {side: round(rss_mb(pid), 1) for side, (_, pid) in agents.items()}
            report = summary(figures, loads, rss)
            out.write_text(json.dumps(report, indent=2))
            print(f"round {number + 1}/{rounds} done (load {loads[-1]:.1f})", file=sys.stderr)
    drop_databases(server, [chorus_mongodb.rsplit("/", 1)[1], f"dp_agent_bench_{stub_port}"])
    return report


def drop_databases(server: str, names: list[str]) -> None:
    """The run's databases, off a server that outlives it (``--mongodb-url``)."""
    from pymongo import MongoClient

    client: MongoClient[dict[str, Any]] = MongoClient(server, serverSelectionTimeoutMS=5000)
    try:
        for name in names:
            client.drop_database(name)
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--mongodb-url", default=os.environ.get("MONGODB_URL"))
    parser.add_argument("--python", help="the Python 3.7 dp-agent's environment is made with")
    parser.add_argument("--package", default=PACKAGE, help="pip's source of dp-agent's cea048e")
    parser.add_argument("--venv", type=Path, default=VENV, help="where dp-agent is installed")
    parser.add_argument("--out", type=Path, default=RESULTS / "dp_agent.json")
    args = parser.parse_args()
    python = scratch_python(args.venv, python_37(args.python), args.package)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with mongodb(args.mongodb_url) as server:
        report = compare(python, server, args.rounds, args.out)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
