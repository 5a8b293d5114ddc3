"""A real MongoDB wire-protocol server for tests: ``MONGODB_URL``, or FerretDB built here.

Why: the MongoDB store must be tested against a real server speaking the wire protocol,
not a mock, and the tests must run on a machine without Docker or a MongoDB install.
FerretDB (an open-source MongoDB-compatible server written in Go) with its SQLite backend
fits: ``tools/ferretdb`` embeds it in a tiny program that ``tools/ferretdb/build.sh``
builds once with the machine's Go toolchain and caches in ``.cache/ferretdb/``.

- :func:`running_mongodb` yields a URL: ``MONGODB_URL`` when set (a real MongoDB, as CI
  may provide), else a FerretDB on a free 127.0.0.1 port with a temporary data directory.
- :func:`start_ferretdb` / :class:`FerretDB` give a server that outage tests can
  :meth:`~FerretDB.stop` (or :meth:`~FerretDB.kill`) and :meth:`~FerretDB.start` again on
  the same port and data directory; the data survives.
- :func:`unavailable_reason` says why neither is possible, so MongoDB tests can skip with
  instructions, unless :func:`mongodb_required` (``REQUIRE_MONGODB=1``, as in CI) makes
  that a failure.

A cold FerretDB build takes about 2 minutes on 2 CPUs (instant once cached), longer than a
per-test timeout: call :func:`build_ferretdb` before the tests (e.g. at session start)
where that matters.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from agent.store.mongo import BULK_WRITE_WIRE_VERSION
from tests.support.builds import built_binary
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
FERRETDB_DIR = ROOT / "tools" / "ferretdb"
BUILD_SCRIPT = FERRETDB_DIR / "build.sh"

#: How long a server may take to answer its first ``ping`` (a bound, far above what a busy
#: machine takes: the probe returns as soon as it answers).
READY_TIMEOUT = 90.0


class MongoServerError(RuntimeError):
    """The test MongoDB server could not be built, started or reached."""


def unavailable_reason() -> str | None:
    """Why no MongoDB server can be had here (with how to enable one), or None if one can.

    A server can be had when ``MONGODB_URL`` is set, when Go is installed (to build
    FerretDB), or when the FerretDB binary is already built.
    """
    if os.environ.get("MONGODB_URL") or ferretdb_available():
        return None
    return (
        "no MongoDB server for these tests: set MONGODB_URL=mongodb://HOST:27017/ to use "
        "one, or install Go 1.24+ (https://go.dev/dl/) so that FerretDB is built from "
        "tools/ferretdb (once, about 2 minutes)"
    )


def ferretdb_available() -> bool:
    """Whether FerretDB can be started here: Go is installed, or the binary is built.

    Tests that stop and restart the server need FerretDB even when ``MONGODB_URL`` is set.
    """
    return shutil.which("go") is not None or _cached_binary() is not None


def mongodb_required() -> bool:
    """Whether a missing MongoDB server fails the tests instead of skipping them (CI)."""
    return os.environ.get("REQUIRE_MONGODB") == "1"


def ferretdb_version() -> str:
    """The FerretDB version pinned in ``tools/ferretdb/go.mod``, e.g. ``v1.24.2``."""
    for line in (FERRETDB_DIR / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:1] == ["require"]:
            words = words[1:]
        if len(words) >= 2 and words[0] == "github.com/FerretDB/FerretDB":
            return words[1]
    raise MongoServerError("tools/ferretdb/go.mod does not require github.com/FerretDB/FerretDB")


def _cached_binary() -> Path | None:
    path = ROOT / ".cache" / "ferretdb" / f"ferretdb-{ferretdb_version()}"
    return path if os.access(path, os.X_OK) else None


def build_ferretdb() -> Path:
    """The FerretDB binary: built by ``build.sh`` (a no-op when up to date).

    Without Go, an already-built binary is used as it is.
    """
    return built_binary("FerretDB", BUILD_SCRIPT, _cached_binary(), MongoServerError)


def wait_for_ping(url: str, timeout: float = READY_TIMEOUT) -> None:
    """Readiness probe: return once the server at ``url`` answers ``ping``.

    pymongo's server selection retries within ``serverSelectionTimeoutMS`` by itself.
    """
    client: MongoClient[dict[str, Any]] = MongoClient(
        url, serverSelectionTimeoutMS=int(timeout * 1000), connectTimeoutMS=2000
    )
    try:
        client.admin.command("ping")
    except PyMongoError as error:
        raise MongoServerError(f"no MongoDB answer at {url} within {timeout}s: {error}") from None
    finally:
        client.close()


class _Output:
    """Reads what a process writes to one pipe, line by line, in a daemon thread.

    Why a thread rather than a file or a bare pipe: the server logs a warning per dropped
    connection, and an undrained pipe would fill and block it in the middle of a test.
    Keeps the last lines (for error messages) and flags the line starting with ``marker``.
    """

    def __init__(self, stream: IO[bytes], marker: str | None = None) -> None:
        self._stream = stream
        self._marker = marker
        self.seen = threading.Event()
        self._lines: collections.deque[str] = collections.deque(maxlen=50)
        self._thread = threading.Thread(target=self._drain, name="ferretdb-output", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        for raw in iter(self._stream.readline, b""):
            line = raw.decode(errors="replace").rstrip()
            self._lines.append(line)
            if self._marker is not None and line.startswith(self._marker):
                self.seen.set()

    def close(self) -> None:
        """Wait for end of file (the process has exited) and close the pipe."""
        self._thread.join(timeout=5)
        self._stream.close()

    def text(self) -> str:
        return "\n".join(self._lines)


class FerretDB:
    """One FerretDB server process on 127.0.0.1, with its SQLite data in ``state_dir``.

    It can be stopped (or killed) and started again on the same port and data directory,
    as outage tests need: clients keep their URL and find the data they wrote.
    """

    def __init__(
        self,
        binary: Path,
        state_dir: str | Path,
        port: int | None = None,
        *,
        bulk_write: bool = False,
    ) -> None:
        self.binary = binary
        self.state_dir = Path(state_dir)
        self.port = port or free_port()
        #: Answer MongoDB 8's ``bulkWrite`` and report its wire version (``-bulk-write``)
        self.bulk_write = bulk_write
        self.process: subprocess.Popen[bytes] | None = None
        self._stdout: _Output | None = None
        self._stderr: _Output | None = None

    @property
    def url(self) -> str:
        """``mongodb://127.0.0.1:PORT/``, the same across restarts."""
        return f"mongodb://127.0.0.1:{self.port}/"

    @property
    def running(self) -> bool:
        """Whether the process is alive (not whether it answers)."""
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = READY_TIMEOUT) -> FerretDB:
        """Start the server and return once it answers ``ping``.

        Raises :class:`MongoServerError` with the tail of its stderr if it exits first
        (e.g. the port was taken meanwhile) or does not answer within ``timeout``.
        """
        if self.running:
            raise MongoServerError(f"FerretDB is already running at {self.url}")
        self._reap()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                str(self.binary),
                "-listen-addr",
                f"127.0.0.1:{self.port}",
                "-state-dir",
                str(self.state_dir),
                "-log-level",
                "warn",
                # Our end of its stdin closes when this process dies, however it dies: the
                # server then stops too instead of outliving the tests.
                "-exit-on-stdin-eof",
                *(["-bulk-write"] if self.bulk_write else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self._stdout = _Output(self.process.stdout, marker="ready ")
        self._stderr = _Output(self.process.stderr)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        # Readiness probe, not test synchronisation. First this process's "ready" line
        # (printed once its port listens): a ping alone could be answered by another server
        # holding the port, while this one fails to bind. Then a ping, which proves the
        # server serves.
        assert self._stdout is not None
        deadline = time.monotonic() + timeout
        while not self._stdout.seen.wait(0.05):
            self._raise_if_exited()
            if time.monotonic() > deadline:
                raise MongoServerError(
                    f"FerretDB did not listen on {self.url} within {timeout}s; "
                    f"stderr:\n{self._stderr_text()}"
                )
        try:
            wait_for_ping(self.url, timeout=max(1.0, deadline - time.monotonic()))
        except MongoServerError as error:
            self._raise_if_exited()
            raise MongoServerError(f"{error}; stderr:\n{self._stderr_text()}") from None

    def _raise_if_exited(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            code = self.process.returncode
            self._reap()
            raise MongoServerError(
                f"FerretDB exited with status {code} before it was ready; stderr:\n"
                f"{self._stderr_text()}"
            )

    def _stderr_text(self) -> str:
        return self._stderr.text() if self._stderr is not None else ""

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``timeout`` seconds.

        FerretDB closes its listener at once (new connections are refused) and gives open
        connections up to 3 s before it closes them, so with connected clients this takes
        about 3 s. Idempotent.
        """
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._reap()

    def kill(self) -> None:
        """Crash the server (SIGKILL): no grace for connections, nothing flushed on exit.

        Writes it acknowledged survive, as SQLite commits them to its write-ahead log.
        """
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
        self._reap()

    def _reap(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            for output in (self._stdout, self._stderr):
                if output is not None:
                    output.close()  # keeps its text for error messages
            self.process = None

    def __enter__(self) -> FerretDB:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_ferretdb(state_dir: str | Path, port: int | None = None) -> FerretDB:
    """Build (if needed) and start a FerretDB keeping its data in ``state_dir``.

    The caller stops it (``server.stop()`` or ``with start_ferretdb(...) as server:``) and
    owns ``state_dir``.
    """
    return FerretDB(build_ferretdb(), state_dir, port).start()


@contextmanager
def running_ferretdb(*, bulk_write: bool = False) -> Iterator[FerretDB]:
    """A FerretDB with a temporary data directory, stopped and removed afterwards."""
    binary = build_ferretdb()
    with tempfile.TemporaryDirectory(prefix="chorus-ferretdb-") as state_dir:
        server = FerretDB(binary, state_dir, bulk_write=bulk_write).start()
        try:
            yield server
        finally:
            server.stop()


@contextmanager
def running_mongodb() -> Iterator[str]:
    """A MongoDB URL: ``MONGODB_URL`` when set, else a FerretDB's for the duration.

    Raises :class:`MongoServerError` when the server cannot be had or does not answer.
    """
    configured = os.environ.get("MONGODB_URL")
    if configured:
        wait_for_ping(configured, timeout=10.0)
        yield configured
        return
    with running_ferretdb() as server:
        yield server.url


def wire_version(url: str) -> int:
    """The highest wire version the server at ``url`` speaks."""
    client: MongoClient[dict[str, Any]] = MongoClient(url, serverSelectionTimeoutMS=10_000)
    try:
        return int(client.admin.command("hello").get("maxWireVersion", 0))
    finally:
        client.close()


@contextmanager
def running_mongodb_8() -> Iterator[str]:
    """A URL of a server with MongoDB 8's ``bulkWrite``: ``MONGODB_URL`` when that server
    is MongoDB 8 or later, else a FerretDB started with ``-bulk-write``."""
    configured = os.environ.get("MONGODB_URL")
    if configured and wire_version(configured) >= BULK_WRITE_WIRE_VERSION:
        yield configured
        return
    with running_ferretdb(bulk_write=True) as server:
        yield server.url
