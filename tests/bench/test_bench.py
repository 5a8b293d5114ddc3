"""``make bench`` runs end to end: the quick run on SQLite, in its own process, as a user
would start it, writes a complete report and a plot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.run import QUICK
from tests.support.processes import REPOSITORY, run_module, unmeasured_environment

#: A benchmark that runs keeps the CPUs busy with a stack of processes: one at a time
#: (another waits), so that in `make test`'s parallel run two of them do not starve each
#: other of CPU (docs/development.md). The tests of what a command refuses start one
#: process, which stops at once: they run beside the others.
STACK = pytest.mark.one_at_a_time("stack")


@STACK
@pytest.mark.timeout(300)
def test_the_quick_benchmark_writes_every_figure(tmp_path: Path) -> None:
    done = run_module(
        "bench.run",
        "--quick",
        "--stores",
        "sqlite",
        "--out",
        str(tmp_path),
        timeout=280,
        env=unmeasured_environment(),  # as a user runs it, not slowed by tracing
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (result,) = json.loads((tmp_path / "bench.json").read_text())["results"]
    assert result["store"] == "sqlite" and result["server"] == "SQLite"
    assert [row["concurrency"] for row in result["load"]] == list(QUICK.load) == [1, 8, 32, 64]
    assert all(row["errors"] == 0 and row["turns_per_s"] > 0 for row in result["load"])
    # the agent's own CPU per turn, from /proc: a turn costs it something, never nothing
    assert all(row["agent_cpu_ms_per_turn"] > 0 for row in result["load"])
    # the overhead is the turn minus the services' own time, read from stored traces
    overhead = result["overhead"]
    assert 0 < overhead["services_critical_path_p50_ms"] < overhead["turn_p50_ms"]
    assert result["flatness"]["turns"] == QUICK.flat and result["flatness"]["ratio"] > 0
    # ten skills of 100 ms each run side by side: in each stored trace, the skills' calls
    # overlap (first start to last end well under the sum of their times), however busy
    # the machine is; and no turn is faster than one skill
    fanout = result["fanout"]
    assert fanout["turn_p50_ms"] >= 100
    assert 100 <= fanout["skills_span_p50_ms"] < fanout["skills_sum_p50_ms"] / 3
    assert result["memory"]["dialogs_big"] == QUICK.dialogs_big
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Load: POST / through 7 stub services" in done.stdout


def test_an_unknown_store_is_refused_by_name(tmp_path: Path) -> None:
    done = run_module("bench.run", "--stores", "sqlite,postgres", "--out", str(tmp_path))
    assert done.returncode == 2
    assert "--stores: unknown postgres" in done.stderr
    assert not (tmp_path / "bench.json").exists()


@STACK
def test_the_http_engine_comparison_measures_each_engine(tmp_path: Path) -> None:
    done = run_module(
        "bench.http_clients",
        "--calls",
        "40",
        "--levels",
        "1,4",
        "--out",
        str(tmp_path),
        timeout=110,
        env=unmeasured_environment(),  # as a user runs it, not slowed by tracing
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "http_clients.json").read_text())
    assert set(report["calls_per_s"]) == {"httpx", "httpx+aiohttp", "aiohttp", "wire"}
    assert all(rate > 0 for rates in report["calls_per_s"].values() for rate in rates.values())
    assert set(report["cpu_us_per_call"]) == set(report["calls_per_s"])


#: ``bench.compare`` as a user starts it, with fewer turns in each round (its
#: ``ROUND_TURNS``, 60 and 240 for a figure one can trust): the rounds, the alternation and
#: the report are the command's own, and the load of 1,200 turns was most of the test's time.
COMPARE_WITH_SHORT_ROUNDS = "import bench.compare as c; c.ROUND_TURNS = {1: 20, 8: 24}; c.main()"


def compare(*arguments: str) -> subprocess.CompletedProcess[str]:
    """``bench.compare`` of this checkout against itself, with short rounds."""
    return subprocess.run(
        [sys.executable, "-c", COMPARE_WITH_SHORT_ROUNDS, "--other", str(REPOSITORY), *arguments],
        cwd=REPOSITORY,
        env=unmeasured_environment(),
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )


@STACK
@pytest.mark.timeout(300)
def test_the_comparison_gives_both_checkouts_every_round(tmp_path: Path) -> None:
    done = compare("--rounds", "2")
    assert done.returncode == 0, done.stderr
    assert "round 2/2 done" in done.stderr  # progress, apart from the report
    report = json.loads(done.stdout)
    assert report["turns_per_round"] == {"1": 20, "8": 24}
    for level in ("1", "8"):
        row = report["levels"][level]
        for side in ("this", "other"):
            assert len(row[side]["p50_ms_per_round"]) == 2
            assert row[side]["p50_ms"] > 0 and row[side]["cpu_ms_per_turn"] > 0
        assert row["p50_other_over_this"] > 0


@STACK
@pytest.mark.timeout(300)
def test_an_interleaved_comparison_gives_both_checkouts_each_round_at_once() -> None:
    """Each agent served as the image serves it (``--served``), at once."""
    done = compare("--rounds", "1", "--interleave", "--served")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["interleaved"] is True and report["served"] is True
    for level in ("1", "8"):
        row = report["levels"][level]
        for side in ("this", "other"):
            assert len(row[side]["cpu_ms_per_round"]) == 1
            assert row[side]["p50_ms"] > 0 and row[side]["cpu_ms_per_turn"] > 0
        assert row["cpu_this_over_other_by_round"] > 0


def test_the_comparison_refuses_a_folder_that_is_no_checkout(tmp_path: Path) -> None:
    done = run_module("bench.compare", "--other", str(tmp_path))
    assert done.returncode == 2
    assert f"--other: {tmp_path} is not a Chorus checkout" in done.stderr
