"""The agent and services as child processes, for tests that kill them (SIGKILL, SIGTERM)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx

from tests.support.ports import free_port


def unmeasured_environment(*dropped: str) -> dict[str, str]:
    """This process's environment for a child that coverage does not measure: without the
    ``COVERAGE_*`` variables (``patch = subprocess`` in pyproject.toml measures every child
    that has them) and without the variables starting with any of ``dropped``. For a child
    running copies of the repository's files, measured where the suite runs them, or a
    benchmark, which tracing would only slow."""
    prefixes = ("COVERAGE_", *dropped)
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


#: How long a test waits for a server it started to answer before it fails. Only the bound
#: of a wait for the event itself (the wait ends as soon as the server answers), so set far
#: above a start-up on a busy machine, where coverage, parallel workers and other suites can
#: make a two-second start take minutes; pytest-timeout still bounds the whole test.
STARTUP_TIMEOUT = 180.0
#: How long a test waits for a command it runs, or a process it stops, to end: the same kind
#: of bound.
COMMAND_TIMEOUT = 180.0

#: The repository's root: where ``python -m bench.run`` and the like run from.
REPOSITORY = Path(__file__).resolve().parents[2]


def run_module(
    module: str,
    *args: str,
    timeout: float = COMMAND_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` from the repository's root, as a user runs a benchmark or
    a tool there: its output as text, its exit code left for the test to read."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def wait_until_up(
    url: str, process: subprocess.Popen[bytes], timeout: float = STARTUP_TIMEOUT
) -> None:
    """Readiness probe: poll ``url`` until it answers, failing if the process exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url, timeout=1.0).raise_for_status()
            return
        except httpx.TransportError:
            assert process.poll() is None, f"the process exited with {process.returncode}"
            assert time.monotonic() < deadline, f"{url} did not come up in {timeout}s"
            time.sleep(0.05)


@contextmanager
def uvicorn_process(
    target: str,
    *,
    factory: bool = False,
    env: dict[str, str] | None = None,
    ready_path: str = "/health",
    stderr: IO[bytes] | int = subprocess.DEVNULL,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``uvicorn target`` on a free port; yields its base URL and the process, and kills
    whatever is left of it at the end. Its log goes to ``stderr`` (a file to read it)."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        target,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    if factory:
        command.insert(3, "--factory")
    process = subprocess.Popen(command, env={**os.environ, **(env or {})}, stderr=stderr)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base + ready_path, process)
        yield base, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


@contextmanager
def agent_process(
    env: dict[str, str], stderr: IO[bytes] | int = subprocess.DEVNULL
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The agent (``create_app`` factory) with ``CHORUS_*`` settings from ``env``."""
    with uvicorn_process(
        "agent.api.app:create_app", factory=True, env=env, ready_path="/ping", stderr=stderr
    ) as running:
        yield running


@contextmanager
def served_agent(
    env: dict[str, str],
    stderr: Path | None = None,
    open_files: int | None = None,
    log_level: str = "warning",
    constants: Mapping[str, float] | None = None,
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """The agent as the image and ``chorus run`` serve it (``python -m agent.api.serve``,
    whose HTTP protocol carries the server's limits), with ``CHORUS_*`` settings from
    ``env``, its stderr and stdout in the file ``stderr``, given ``open_files``, that open-file
    limit (``ulimit -n``), and the server's ``--log-level`` (``info`` logs each request);
    yields its port and the process. ``constants`` are values for the server's constants
    (``HEADER_TIMEOUT``, ``WEBSOCKET_IDLE_TIMEOUT``: a test's small ones), set in the child
    before it serves, as they are no settings."""
    port = free_port()
    command = [sys.executable, "-m", "agent.api.serve", "--port", str(port)]
    if constants:
        assigned = "; ".join(f"serve.{name} = {value!r}" for name, value in constants.items())
        launcher = f"import agent.api.serve as serve; {assigned}; serve.main()"
        command = [sys.executable, "-c", launcher, "--port", str(port)]

    def limit_open_files() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    with open(stderr or os.devnull, "wb") as log:
        process = subprocess.Popen(
            [*command, "--log-level", log_level],
            env={**os.environ, **env},
            stdout=log if stderr else None,  # uvicorn's access lines, at --log-level info
            stderr=log,
            preexec_fn=limit_open_files,
        )
        try:
            wait_until_up(f"http://127.0.0.1:{port}/ping", process)
            yield port, process
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
