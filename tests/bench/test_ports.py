"""The ports tests and benchmarks start servers on: a benchmark run beside the test suites
never takes a port a test was handed, however many it hands out, wherever its counter is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.ports import free_port
from tests.support.processes import COMMAND_TIMEOUT, unmeasured_environment

ROOT = Path(__file__).resolve().parents[2]
#: More ports than the range below the ephemeral one holds: any allocator drawing from the
#: tests' ports would go round to them.
MANY = 8001


def test_a_benchmark_never_takes_a_port_handed_to_a_test(tmp_path: Path) -> None:
    """Ports handed to a test, not bound yet (its child is still starting), while a
    benchmark in another process, with its counter in another temporary folder, hands out
    more ports than there are: none of them is the test's."""
    handed = {free_port() for _ in range(20)}
    code = f"from bench.ports import free_port\nprint(*{{free_port() for _ in range({MANY})}})"
    benchmark = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**unmeasured_environment(), "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
        timeout=COMMAND_TIMEOUT,
    )
    taken = {int(port) for port in benchmark.stdout.split()}
    assert len(taken) > 100, "the benchmark went round its ports"
    assert not handed & taken
