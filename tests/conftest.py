"""Shared fixtures: real services on 127.0.0.1 and an agent wired to them."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.api.app import create_app
from agent.settings import Settings
from tests.support.mongo_server import (
    mongodb_required,
    running_mongodb,
    running_mongodb_8,
    unavailable_reason,
)
from tests.support.servers import ServerThread, serving


@pytest.fixture
def services() -> Iterator[Callable[[Any], ServerThread]]:
    """Start apps as real servers; all stop at the end of the test."""
    with ExitStack() as stack:
        yield lambda app: stack.enter_context(serving(app))


def service_entry(url: str, timeout: float = 2.0, **extra: Any) -> dict[str, Any]:
    return {"connector": {"url": f"{url}/respond", "timeout": timeout}, **extra}


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


def fresh_database(server_url: str) -> str:
    """The server's URL naming a new database of its own for one test (options such as
    credentials kept)."""
    head, sep, options = server_url.partition("?")
    scheme, rest = head.split("://", 1)
    hosts = rest.split("/", 1)[0]
    return f"{scheme}://{hosts}/chorus_test_{uuid.uuid4().hex}{sep}{options}"


@pytest.fixture(params=["sqlite", "mongodb"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The agent's store: every agent test runs on SQLite and on MongoDB; a test that
    concerns how a turn's end is written also on MongoDB 8, with
    ``@pytest.mark.parametrize("db_url", [..., "mongodb-8"], indirect=True)``."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/chorus.db"
    return fresh_mongodb_database(request, request.param)


AgentFactory = Callable[..., httpx.Client]


@pytest.fixture
def agent(tmp_path: Path, db_url: str) -> Iterator[AgentFactory]:
    """``agent(pipeline_dict)`` starts the real agent over HTTP and returns a client to it."""
    started = itertools.count()
    with ExitStack() as stack:

        def start(pipeline: dict[str, Any], **settings: Any) -> httpx.Client:
            path = tmp_path / f"pipeline-{next(started)}.json"
            path.write_text(json.dumps(pipeline))
            app = create_app(Settings(db_url=db_url, pipeline=path, **settings))
            server = stack.enter_context(serving(app))
            return stack.enter_context(httpx.Client(base_url=server.url, timeout=30))

        yield start
