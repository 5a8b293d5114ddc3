"""``pytest --cpu-report``: the CPU each test file costs, its child processes included.

The suite's wall time on a small machine is bound by its CPU (``make test`` keeps both cores
busy), and most of that CPU is spent in processes a test starts: agents, services, stacks,
``chorus`` commands, pytest run again in a copy. ``--durations`` shows only wall time, which
a busy machine stretches; this report shows what a test costs whatever else runs.

Around each test (its setup, call and teardown), the worker's own CPU time
(``RUSAGE_SELF``: the test and the server threads it starts) and that of its reaped children
(``RUSAGE_CHILDREN``: a child's CPU is counted when it is waited for, so a process a
module or session fixture keeps counts for the test after which it is stopped) are read
before and after. Each worker appends its tests' figures to a temporary file the controller
names; the controller (or the only process, without ``-n``) sums them by file at the end and
prints the costliest, with the workers' own start-up and collection, which no test pays,
then the run's tail: when each worker ran out of tests, and what the run spent after its
last test (the workers' end, coverage's combining and report, the session's end).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: How many files the report lists, costliest first.
LISTED = 25


def cpu_seconds() -> tuple[float, float]:
    """This process's CPU seconds (user + system), and its reaped children's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def figures_file(config: pytest.Config) -> Path:
    """Where this run's figures go: a file the controller names (a temporary one) and hands
    its workers (``pytest_configure_node``)."""
    workerinput: dict[str, str] | None = getattr(config, "workerinput", None)
    if workerinput is not None:
        return Path(workerinput["cpu_report"])
    return Path(config.getoption("cpu_report_file"))


class CpuReport:
    """The plugin: registered by tests/conftest.py when ``--cpu-report`` is given."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        #: When the run's steps after its last test ended (the machine's clock): the test
        #: loop (every worker done, its session fixtures stopped), then pytest-cov's
        #: combining and report (its wrapper of the loop, inside :class:`LoopEnd`'s).
        self.ends: dict[str, float] = {}
        #: The CPU (own, children) of the last test's teardown on this worker, where the
        #: session's fixtures stop: their processes (FerretDB servers, kept the whole run)
        #: are reaped there, and were charged to whichever test happened to run last.
        self.session_teardown = (0.0, 0.0)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Iterator[None]:
        if nextitem is not None:
            return (yield)
        own, children = cpu_seconds()
        try:
            return (yield)
        finally:
            own_after, children_after = cpu_seconds()
            self.session_teardown = (own_after - own, children_after - children)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[None]:
        try:
            return (yield)
        finally:
            self.ends["the workers done"] = time.time()

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist's: each worker is told where to write its figures."""
        node.workerinput["cpu_report"] = str(figures_file(self.config))

    def write(self, record: dict[str, object]) -> None:
        with figures_file(self.config).open("a") as out:
            out.write(json.dumps(record) + "\n")

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        own, children = cpu_seconds()
        wall, started = time.monotonic(), time.time()
        try:
            return (yield)
        finally:
            own_after, children_after = cpu_seconds()
            workerinput: dict[str, str] = getattr(self.config, "workerinput", {})
            session_own, session_children = self.session_teardown
            if any(self.session_teardown):
                self.write(
                    {"file": "", "session": True, "own": session_own, "children": session_children}
                )
                self.session_teardown = (0.0, 0.0)
            self.write(
                {
                    "file": item.nodeid.split("::")[0],
                    "own": own_after - own - session_own,
                    "children": children_after - children - session_children,
                    "wall": time.monotonic() - wall,
                    # the clock of the machine, which every worker shares: for the tail
                    "test": item.nodeid,
                    "worker": workerinput.get("workerid", ""),
                    "start": started,
                    "end": time.time(),
                }
            )

    def pytest_sessionfinish(self) -> None:
        if hasattr(self.config, "workerinput"):  # a worker's start-up and collection
            own, children = cpu_seconds()
            self.write({"file": "", "own": own, "children": children, "wall": 0.0})

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if hasattr(self.config, "workerinput"):
            return
        path = figures_file(self.config)
        if not path.exists():
            return
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
        workers = session = 0.0
        runs: list[dict[str, Any]] = []
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("session"):
                session += record["own"] + record["children"]
                continue
            if not record["file"]:
                workers += record["own"] + record["children"]
                continue
            runs.append(record)
            row = totals[record["file"]]
            row[0] += 1
            row[1] += record["own"]
            row[2] += record["children"]
            row[3] += record["wall"]
        tests = sum(own + children for _, own, children, _ in totals.values())
        write = terminalreporter.write_line
        terminalreporter.section("CPU by test file (seconds)")
        write(f"{'tests':>5} {'own':>7} {'children':>8} {'cpu':>7} {'wall':>7}  file")
        ranked = sorted(totals.items(), key=lambda item: -(item[1][1] + item[1][2]))
        for file, (count, own, children, wall) in ranked[:LISTED]:
            cpu = own + children
            write(f"{count:5.0f} {own:7.1f} {children:8.1f} {cpu:7.1f} {wall:7.1f}  {file}")
        write(f"tests: {tests:.1f} s of CPU in {len(totals)} files")
        if workers:
            # a worker's whole CPU, its tests' included: what is left is start-up and collection
            # the session fixtures' part is in it too, reported on its own line
            write(f"workers' start-up and collection: {workers - tests - session:.1f} s")
        if session:
            write(
                f"the workers' session fixtures (FerretDB servers), stopped after their last "
                f"test: {session:.1f} s"
            )
        tail(runs, write)
        if runs:
            after_last_test(max(run["end"] for run in runs), self.ends, write)


class LoopEnd:
    """The outermost wrapper of the test loop: it ends once pytest-cov, whose wrapper is
    inside it, has combined the run's coverage data and computed its report."""

    def __init__(self, ends: dict[str, float]) -> None:
        self.ends = ends

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[None]:
        try:
            return (yield)
        finally:
            self.ends["coverage combined and reported"] = time.time()


def after_last_test(last: float, ends: dict[str, float], write: Any) -> None:
    """What the run spends after its last test, step by step: the workers' own end (their
    session fixtures: servers, FerretDB), coverage's combining and report, then the
    session's end until this summary (pytest's removal of old temporary folders among
    it)."""
    steps = [*ends.items(), ("the session's end", time.time())]
    write("after the last test: " + ", ".join(f"{name} +{at - last:.1f} s" for name, at in steps))


def tail(runs: list[dict[str, Any]], write: Any) -> None:
    """The end of a parallel run: when each worker ran out of tests, and the tests still
    running once the first had, longest first. A worker idle while the last tests run is
    time the run loses; a long test that starts late is what makes such a tail."""
    last: dict[str, float] = {}
    for run in runs:
        last[run["worker"]] = max(last.get(run["worker"], 0.0), run["end"])
    if len(last) < 2:
        return
    began = min(run["start"] for run in runs)
    first_idle, end = min(last.values()), max(last.values())
    ends = ", ".join(f"{worker} {at - began:.0f} s" for worker, at in sorted(last.items()))
    write(f"workers ran out of tests at: {ends}; the tail, a worker idle: {end - first_idle:.0f} s")
    late = sorted((run for run in runs if run["end"] > first_idle), key=lambda r: r["start"])
    for run in sorted(late, key=lambda r: r["start"] - r["end"])[: LISTED // 2]:
        started, took = run["start"] - began, run["end"] - run["start"]
        write(f"  {run['worker']:>4} {started:6.0f} s +{took:5.0f} s  {run['test']}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-report",
        action="store_true",
        help="print the CPU each test file costs, its child processes included "
        "(tests/support/cpu_report.py)",
    )
    parser.addoption("--cpu-report-file", default="", help=argparse.SUPPRESS)


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("cpu_report"):
        return
    if not hasattr(config, "workerinput"):  # the controller, or the only process
        handle, name = tempfile.mkstemp(prefix="cpu-report-", suffix=".jsonl")
        os.close(handle)
        config.option.cpu_report_file = name
        config.add_cleanup(lambda: os.unlink(name))
    report = CpuReport(config)
    config.pluginmanager.register(report, "cpu-report")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(LoopEnd(report.ends), "cpu-report-loop-end")
