"""``bench.turn_profile`` as a user runs it: the agent profiled over a few turns of
``make bench``'s shape, and a report of what a turn runs, per turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.processes import run_module, unmeasured_environment

#: A stack of processes, as the other benchmarks' tests (tests/bench/test_bench.py).
STACK = pytest.mark.one_at_a_time("stack")


@STACK
@pytest.mark.timeout(300)
def test_a_turns_profile_reports_what_each_turn_runs(tmp_path: Path) -> None:
    raw = tmp_path / "turns.prof"
    done = run_module(
        "bench.turn_profile",
        "--turns",
        "40",
        "--top",
        "5",
        "--out",
        str(raw),
        timeout=280,
        env=unmeasured_environment(),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["turns"] == 40 and report["concurrency"] == 1
    for ranking in ("by_own", "by_cumulative"):
        rows = report[ranking]
        assert len(rows) == 5
        # only what runs on (nearly) every turn: no heartbeat, no idle wait
        assert all(row["calls"] >= 0.5 for row in rows)
    ranked = [row["cumulative_us"] for row in report["by_cumulative"]]
    assert ranked == sorted(ranked, reverse=True)
    totals = report["totals_per_turn"]
    # every turn reads and writes the store, and makes a task for each of its 7 calls
    assert totals["SQLite statements"] >= 1
    assert totals["tasks made"] >= 7
    assert totals["Python calls (with the built-ins)"] > totals["SQLite statements"]
    assert report["agent_cpu_ms_per_turn_profiled"] > 0
    assert raw.stat().st_size > 0  # kept for pstats
