"""Start the local stack: every pipeline service found in this repository, then the agent.

A service named ``NAME`` in group ``G`` lives in ``<folder of G>/NAME/app.py`` (annotators
of every role in ``annotators/``, ``skills/``, ``skill_selectors/``, ``response_selectors/``);
it is started with uvicorn on the port of its URL in the pipeline file. Services with URLs
elsewhere are expected to be running already.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from agent.turn.base import LocalService


def start(service: LocalService, root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            service.module,
            "--host",
            service.host,
            "--port",
            str(service.port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=root,
    )


#: Seconds after which a service that has not answered yet is said to be still starting.
PATIENCE = 10.0
#: Seconds a service whose process runs may take to answer before it is given up: far
#: above a start-up on a busy machine (the intents annotator loads its embeddings), where
#: a few seconds can become a minute.
STARTUP_LIMIT = 300.0


def wait_healthy(
    service: LocalService,
    process: subprocess.Popen[bytes],
    timeout: float = STARTUP_LIMIT,
    on_slow: Callable[[LocalService, float], None] | None = None,
) -> None:
    """Poll the health route until it answers (a readiness probe for a child process).

    A service whose process still runs is still starting, however long its start-up takes
    on a busy machine: it is waited for, up to ``timeout``, and ``on_slow`` is told once
    after :data:`PATIENCE` seconds, so the wait is not silent. Only a process that exited,
    or one that never answers, is given up."""
    started = time.monotonic()
    deadline = started + timeout
    told = False
    # one client for all the polls: httpx.get makes a client, and its TLS context, each time
    with httpx.Client(timeout=1.0) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"service {service.name} exited with code {process.returncode}")
            try:
                if http.get(service.health_url).is_success:
                    return
            except httpx.TransportError:
                pass
            if on_slow is not None and not told and time.monotonic() - started >= PATIENCE:
                told = True
                on_slow(service, time.monotonic() - started)
            time.sleep(0.1)
    raise RuntimeError(
        f"service {service.name} did not answer {service.health_url} within {timeout:.0f}s"
    )


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


_PROBE_THREAD = "chorus-announce"


class _QuietProbe(logging.Filter):
    """Leaves the probe's own requests out of the agent's log: the agent logs httpx's
    requests at INFO, and ``GET /ping`` lines before "Chorus agent on" read as noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != _PROBE_THREAD


@contextmanager
def announced_when_up(url: str, announce: Callable[[], None]) -> Iterator[None]:
    """Call ``announce`` once ``url`` (the agent's /ping) answers, from a thread of its own,
    while the block serves the agent in this one: "the agent is on" is said when it is,
    not when its start began (an in-process service's lifespan may hold it)."""
    stopped = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=1.0) as http:  # one client (and TLS context) for all polls
            while not stopped.is_set():  # a readiness probe, ended by the block's end
                try:
                    if http.get(url).is_success:
                        announce()
                        return
                except httpx.TransportError:
                    pass
                stopped.wait(0.1)

    thread = threading.Thread(target=probe, name=_PROBE_THREAD, daemon=True)
    quiet = _QuietProbe()
    httpx_log = logging.getLogger("httpx")
    httpx_log.addFilter(quiet)
    thread.start()
    try:
        yield
    finally:
        stopped.set()
        httpx_log.removeFilter(quiet)
