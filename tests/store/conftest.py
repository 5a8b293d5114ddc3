"""The ``store`` fixture: each contract test runs against SQLite, MongoDB, and MongoDB 8.

The MongoDB servers are the session's (``mongodb_url`` and ``mongodb_8_url`` in
``tests/conftest.py``: ``MONGODB_URL`` or a FerretDB started here, skipped with the reason
when neither can be had, a failure under ``REQUIRE_MONGODB=1``). Each test gets a
database of its own, dropped afterwards, so tests never see each other's users. The
fixture is function-scoped: every test opens its own client, the way the agent opens one
per process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from pymongo import AsyncMongoClient
from pymongo.monitoring import CommandListener

from agent.store import Store, open_store
from agent.store.mongo import MongoStore
from tests.conftest import fresh_database, fresh_mongodb_database


@asynccontextmanager
async def mongo_store(
    server_url: str,
    listeners: tuple[CommandListener, ...] = (),
) -> AsyncIterator[tuple[MongoStore, str]]:
    """A :class:`MongoStore` on a fresh database of the server, dropped on exit."""
    url = fresh_database(server_url)
    store = await MongoStore.open(url, event_listeners=listeners)
    try:
        yield store, url
    finally:
        await store.close()
        await _drop(url)


async def _drop(url: str) -> None:
    """Drop the database ``url`` names."""
    admin: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
    try:
        await admin.drop_database(admin.get_default_database().name)
    finally:
        await admin.close()


@asynccontextmanager
async def _opened(url: str) -> AsyncIterator[Store]:
    store = await open_store(url)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(params=["sqlite", "mongodb", "mongodb-8"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh database on SQLite; MongoDB 6 and 7 (a turn's end in two commands);
    MongoDB 8 (in one ``bulkWrite``). A MongoDB database is dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/contract.db"
        return
    url = fresh_mongodb_database(request, request.param)
    yield url
    await _drop(url)


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    async with _opened(store_url) as opened:
        yield opened


@pytest.fixture
async def another_agent_store(store_url: str) -> AsyncIterator[Store]:
    """A second store on the same database, with memory of its own: what another agent
    process sharing the database writes through."""
    async with _opened(store_url) as opened:
        yield opened
