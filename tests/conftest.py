"""Shared fixtures: real services on 127.0.0.1 and an agent wired to them.

Which tests run on both stores: an agent test runs on SQLite (``db_url``). The turn, the
routes and the services are the same code over either store; what the stores do differently
is the store's own, and the contract suite (``tests/store``) holds every store method to the
same behaviour on SQLite, MongoDB and MongoDB 8. A test whose behaviour depends on what the
store is (a write the database fails or refuses, MongoDB's key escaping, several agent
processes sharing one database, an import, export or restore, a dialog's fields kept whole
through its close) is marked ``@pytest.mark.both_stores`` and runs on SQLite and on MongoDB
as well. A test that never reaches the store (request validation and its 4xx, the API key,
CORS and the body limit, the pages and their files, ``/api/pipeline``'s description,
start-up warnings) is marked ``@pytest.mark.store_agnostic``: the mark is checked, and a
store-agnostic test that leaves anything in its SQLite database fails, saying to remove it.

Which tests share servers: ``agent`` and ``services`` start servers for one test. A
module's store-agnostic tests that only read (pages, the pipeline's description, refused
requests) share an agent instead: a module fixture calls ``shared_agent`` once with
``shared_services``. A test that kills, restarts or reconfigures a server, counts what
happened, or needs a fresh store keeps its own.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import sqlite3
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.api.app import create_app
from agent.dream.config import is_dp_agent_config
from agent.settings import Settings
from tests.support.asgi import hosted
from tests.support.cpu_report import pytest_addoption as pytest_addoption
from tests.support.cpu_report import pytest_configure as pytest_configure
from tests.support.mongo_server import (
    mongodb_required,
    running_mongodb,
    running_mongodb_8,
    unavailable_reason,
)
from tests.support.servers import ServerThread, serving
from tests.support.tls import share as share_one_tls_context

# A test's httpx clients share one TLS context, made once (tests/support/tls.py).
share_one_tls_context()

# pytest_addoption and pytest_configure, imported above, are `pytest --cpu-report`'s hooks
# (tests/support/cpu_report.py): pytest finds them here by their names.


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """A test marked ``one_at_a_time(NAME)`` runs, in a parallel run (``pytest -n``), while
    no other test marked with the same NAME does: each waits for a lock file of the run's
    workers. Such tests keep the CPUs busy themselves (a whole stack of processes, pytest
    run again), and two at once starve each other and the tests beside them. The lock is
    taken around the whole test, outside pytest-timeout's clock, so the wait does not
    count against a test's timeout."""
    mark = item.get_closest_marker("one_at_a_time")
    # Only in an xdist worker (which has ``workerinput``), not in a pytest it runs, which
    # inherits its environment.
    if mark is None or not hasattr(item.config, "workerinput"):
        return (yield)
    # A worker's base temporary directory is in the run's, which pytest cleans up later.
    run = Path(item.config.getoption("basetemp")).parent
    with (run / f"one-at-a-time-{mark.args[0]}.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file is closed
        return (yield)


#: Fixtures that start real servers on 127.0.0.1 (``sockets`` below); ``agent`` does for a
#: test marked ``served``.
SOCKET_FIXTURES = frozenset({"services", "shared_services", "mongodb_url", "mongodb_8_url"})
#: The support modules whose helpers start servers or processes.
SERVER_MODULES = frozenset(
    {
        "tests.support.servers",
        "tests.support.processes",
        "tests.support.mongo_server",
        "tests.support.builds",
        "tests.support.helm",
        "tests.support.images",
        "agent.cli.stack",
    }
)
#: Helpers of those modules that start nothing.
NOT_SERVERS = frozenset({"unmeasured_environment", "free_port", "port_is_free"})


def starts_servers(item: pytest.Item) -> bool:
    """Whether ``item`` starts a real server or process (the ``sockets`` mark): it takes a
    fixture that starts one, runs on MongoDB (the FerretDB server), lives in a module that
    imports ``subprocess`` or a helper that starts one, or is a browser test."""
    if SOCKET_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    if item.get_closest_marker("served") is not None:
        return True
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    if any(str(params.get(name, "")).startswith("mongodb") for name in ("db_url", "store_url")):
        return True
    module = getattr(item, "module", None)
    if module is None:
        return False
    for name, value in vars(module).items():
        if value is subprocess:
            return True
        origin = getattr(value, "__module__", None)
        if origin in SERVER_MODULES and name not in NOT_SERVERS and callable(value):
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test that starts a real server or process ``sockets``: ``pytest -m "not
    sockets"`` (``make test-fast``) runs the in-process tier alone (docs/development.md,
    "Test tiers"). In a run with ``--dist worksteal``, the ``one_at_a_time`` tests go
    first, each name's to a worker of its own (``heaviest_first``)."""
    for item in items:
        if "tests/browser/" in item.nodeid:  # Chromium opens the agent's pages at its URL
            item.add_marker(pytest.mark.served)
        if starts_servers(item):
            item.add_marker(pytest.mark.sockets)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get("dist") == "worksteal":
        items[:] = heaviest_first(items, int(workerinput["workercount"]))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's, in the controller: each worker is told the run's ``--dist`` mode,
    which :func:`pytest_collection_modifyitems` orders its collection by. A worker's own
    ``--dist`` option reads ``no`` (xdist sets it so, as the worker runs its tests in one
    process): asked there, the order was never changed, and the chains ran where the
    collection put them (the ``stack`` chain's benchmarks last, 34 s with a worker idle)."""
    node.workerinput["dist"] = node.config.getoption("dist")


def heaviest_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` reordered for pytest-xdist's worksteal: the tests marked ``one_at_a_time``
    with one name (a chain that runs one test at a time: together they take longer than
    the rest of a worker's share) at the start of one worker's share, each name's at
    another's. worksteal hands the workers consecutive shares of the collection, in order,
    and a worker that runs out takes tests from the end of another's: so each chain runs
    from the run's start, on one worker, without waiting for another worker's test of its
    name, instead of starting where the collection put it, late, into a tail with the
    other workers idle. Every worker collects the same order (xdist checks), as
    ``workers`` is the same for all."""
    chains: dict[str, list[pytest.Item]] = {}
    for item in items:
        mark = item.get_closest_marker("one_at_a_time")
        if mark is not None:
            chains.setdefault(mark.args[0], []).append(item)
    if workers < 2 or not chains:
        return items
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for share, chain in zip(shares, sorted(chains.values(), key=len, reverse=True), strict=False):
        share.extend(chain)  # more names than workers: the rest stay where they are
    first = {id(item) for share in shares for item in share}
    rest = iter(item for item in items if id(item) not in first)
    left = len(items)
    for index, share in enumerate(shares):
        size = left // (workers - index)  # the share worksteal hands this worker
        left -= size
        if len(share) > size:  # a chain longer than a share: no order helps
            return items
        share.extend(itertools.islice(rest, size - len(share)))
    return [item for share in shares for item in share]


@pytest.fixture
def services() -> Iterator[Callable[[Any], ServerThread]]:
    """Start apps as real servers; all stop at the end of the test."""
    with ExitStack() as stack:
        yield lambda app: stack.enter_context(serving(app))


#: The timeout of a test's service, and the turn deadline of a test's pipeline, when the
#: test is not about timeouts (the agent's defaults are 2 s and 10 s). On a busy machine
#: (coverage, parallel workers, other suites, other servers) what takes milliseconds alone
#: can take seconds, and a missed timeout reads as behaviour: a "timeout" error, the
#: fallback answer. Both stay well under pytest-timeout's 300 s for the whole test, and a
#: test never waits for them unless a service hangs. A test about timeouts sets its own.
SERVICE_TIMEOUT = 30.0
TURN_TIMEOUT = 60.0
#: How long a test's client waits for an answer: longer than a turn may take.
CLIENT_TIMEOUT = TURN_TIMEOUT + 30


def service_entry(url: str, timeout: float = SERVICE_TIMEOUT, **extra: Any) -> dict[str, Any]:
    return {"connector": {"url": f"{url}/respond", "timeout": timeout}, **extra}


def patient(pipeline: dict[str, Any]) -> dict[str, Any]:
    """A Chorus pipeline with :data:`TURN_TIMEOUT` for its turn deadline unless it sets one
    (a dp-agent pipeline's deadline is the ``dream_turn_timeout`` setting)."""
    if is_dp_agent_config(pipeline):
        return pipeline
    return {"turn_timeout": TURN_TIMEOUT, **pipeline}


@pytest.fixture(scope="session")
def mongodb_url() -> Iterator[str]:
    """A real MongoDB wire-protocol server (MONGODB_URL, or FerretDB built here)."""
    reason = unavailable_reason()
    if reason is not None:
        if mongodb_required():
            pytest.fail(f"REQUIRE_MONGODB=1 but {reason}")
        pytest.skip(reason)
    with running_mongodb() as url:
        yield url


@pytest.fixture(scope="session")
def mongodb_8_url(mongodb_url: str) -> Iterator[str]:
    """A server with MongoDB 8's client-level ``bulkWrite`` (MONGODB_URL when it is
    MongoDB 8, else a FerretDB started with ``-bulk-write``), where a turn's end is one
    command."""
    with running_mongodb_8() as url:
        yield url


def fresh_mongodb_database(request: pytest.FixtureRequest, server: str) -> str:
    """A new database on the session's MongoDB server named by a fixture parameter:
    ``"mongodb"`` (MongoDB 6 and 7) or ``"mongodb-8"`` (with ``bulkWrite``)."""
    fixture = "mongodb_8_url" if server == "mongodb-8" else "mongodb_url"
    return fresh_database(request.getfixturevalue(fixture))


#: How long a test's store waits to reach the test server before it answers 503: the
#: agent's own 3 s is for a database that is down, and a busy machine (two suites at once,
#: the server a process among many) can take longer than that to answer one that is up.
BUSY_MACHINE_TIMEOUT_MS = 30_000


def fresh_database(server_url: str) -> str:
    """The server's URL naming a new database of its own for one test (options such as
    credentials kept; timeouts a busy machine meets unless the URL sets its own)."""
    head, _, options = server_url.partition("?")
    scheme, rest = head.split("://", 1)
    hosts = rest.split("/", 1)[0]
    given = options.lower()
    extra = [
        f"{name}={BUSY_MACHINE_TIMEOUT_MS}"
        for name in ("serverSelectionTimeoutMS", "connectTimeoutMS")
        if name.lower() not in given
    ]
    query = "&".join(part for part in (options, *extra) if part)
    return f"{scheme}://{hosts}/chorus_test_{uuid.uuid4().hex}?{query}"


def parametrizes(mark: pytest.Mark, name: str) -> bool:
    """Whether the ``parametrize`` mark ``mark`` gives ``name`` its values."""
    names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
    if isinstance(names, str):
        names = [part.strip() for part in names.split(",")]
    return name in names


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``db_url`` is SQLite only unless the test is marked ``both_stores`` (the module's
    docstring) or parametrises ``db_url`` itself: as a ``parametrize`` mark, added before
    pytest reads the marks and the fixtures' params, so that it replaces ``db_url``'s own
    params as a written mark would."""
    definition = metafunc.definition
    if "db_url" not in metafunc.fixturenames:
        return
    # Only this module's ``db_url``: a module or folder that defines its own (MongoDB's
    # command counts, the browser tests) keeps its own params.
    fixture = metafunc._arg2fixturedefs.get("db_url", ())[-1:]
    if not fixture or list(fixture[0].params or ()) != BOTH_STORES:
        return
    if definition.get_closest_marker("both_stores") is not None:
        return
    if any(parametrizes(mark, "db_url") for mark in definition.iter_markers("parametrize")):
        return
    definition.add_marker(pytest.mark.parametrize("db_url", ["sqlite"], indirect=True))


#: ``db_url``'s params: the stores a test marked ``both_stores`` runs on.
BOTH_STORES = ["sqlite", "mongodb"]


@pytest.fixture(params=BOTH_STORES)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The agent's store: SQLite, and MongoDB too for a test marked ``both_stores``; a test
    that concerns how a turn's end is written also on MongoDB 8, with
    ``@pytest.mark.parametrize("db_url", [..., "mongodb-8"], indirect=True)``."""
    if request.param != "sqlite":
        yield fresh_mongodb_database(request, request.param)
        return
    path = tmp_path / "chorus.db"
    yield f"sqlite:///{path}"
    if request.node.get_closest_marker("store_agnostic") is not None:
        assert_nothing_stored(path, request.node.nodeid)


def assert_nothing_stored(path: Path, test: str) -> None:
    """Fail ``test`` (store-agnostic, or sharing an agent) if it left rows in the SQLite
    database at ``path``: it wrote dialog state, so it is not store-agnostic."""
    if not path.exists():
        return
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as database:
        listed = database.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        tables = [row[0] for row in listed]
        kept = {
            table: count
            for table in tables
            if (count := database.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
        }
    if kept:
        pytest.fail(
            f"{test} is store_agnostic but left rows in the store ({kept}): it writes "
            "dialog state (`agent` without the mark; `both_stores` if what it checks "
            "depends on the store)"
        )


AgentFactory = Callable[..., httpx.Client]


def served(request: pytest.FixtureRequest) -> bool:
    """Whether the test (or the module, for a module fixture) is marked ``served``: its
    agent is served with uvicorn on 127.0.0.1, as it checks what only a socket shows."""
    return request.node.get_closest_marker("served") is not None


@contextmanager
def agents(folder: Path, db_url: str, served: bool = False) -> Iterator[AgentFactory]:
    """A factory of real agents on ``db_url``, their pipeline files in ``folder``: each call
    starts one and returns an HTTP client to it; all stop on exit. The agent runs in the
    test's process, its lifespan open, reached through ``httpx.ASGITransport``
    (:func:`tests.support.asgi.hosted`); ``served`` serves it with uvicorn on 127.0.0.1
    instead, for what only a socket shows (the ``served`` mark)."""
    started = itertools.count()
    with ExitStack() as stack:

        def start(pipeline: dict[str, Any], **settings: Any) -> httpx.Client:
            path = folder / f"pipeline-{next(started)}.json"
            path.write_text(json.dumps(patient(pipeline)))
            settings.setdefault("dream_turn_timeout", TURN_TIMEOUT)
            app = create_app(Settings(db_url=db_url, pipeline=path, **settings))
            if not served:
                return stack.enter_context(hosted(app, timeout=CLIENT_TIMEOUT))
            server = stack.enter_context(serving(app))
            return stack.enter_context(httpx.Client(base_url=server.url, timeout=CLIENT_TIMEOUT))

        yield start


@pytest.fixture
def agent(request: pytest.FixtureRequest, tmp_path: Path, db_url: str) -> Iterator[AgentFactory]:
    """``agent(pipeline_dict)`` starts the real agent and returns a client to it: in the
    test's process, or served on 127.0.0.1 for a test marked ``served``."""
    with agents(tmp_path, db_url, served=served(request)) as start:
        yield start


@pytest.fixture(scope="module")
def shared_services() -> Iterator[Callable[[Any], ServerThread]]:
    """``services`` started once for a module's tests that share them (with
    :func:`shared_agent`), stopped after its last test."""
    with ExitStack() as stack:
        yield lambda app: stack.enter_context(serving(app))


@pytest.fixture(scope="module")
def shared_agent(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AgentFactory]:
    """``agent`` for a module's ``store_agnostic`` tests that only read (pages, the
    pipeline's description, requests refused with a 4xx): a module fixture calls it once
    and its tests share that agent, on SQLite, instead of starting one each. A test that
    kills, restarts or reconfigures an agent, or needs a fresh store, keeps ``agent``.
    Checked at the end: the shared agents stored nothing."""
    folder = tmp_path_factory.mktemp("shared-agent")
    with agents(folder, f"sqlite:///{folder}/chorus.db", served=served(request)) as start:
        yield start
    assert_nothing_stored(folder / "chorus.db", f"a test of {request.module.__name__}")
