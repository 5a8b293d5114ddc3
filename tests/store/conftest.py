"""The ``store`` fixture: each contract test runs against SQLite and against MongoDB.

The MongoDB server is the session's one (``mongodb_url`` in ``tests/conftest.py``:
``MONGODB_URL`` or a FerretDB started here, skipped with the reason when neither can be
had, a failure under ``REQUIRE_MONGODB=1``). Each test gets a database of its own, dropped
afterwards, so tests never see each other's users. The fixture is function-scoped: every
test opens its own client, the way the agent opens one per process.
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
from tests.conftest import fresh_database


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
        admin: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
        try:
            await admin.drop_database(admin.get_default_database().name)
        finally:
            await admin.close()


@pytest.fixture(params=["sqlite", "mongodb"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        opened = await open_store(f"sqlite:///{tmp_path}/contract.db")
        try:
            yield opened
        finally:
            await opened.close()
        return
    async with mongo_store(request.getfixturevalue("mongodb_url")) as (mongo, _):
        yield mongo
