"""The MongoDB store while its server is away and once it is back: its calls wait for one
probe instead of going to the driver, so the burst of calls that follows the server's
return (every user's retry, every lease's renewal) finds the driver's connection pool ready.

Before, each of those calls went to the driver while its pool was paused, and a call that
failed there paused the pool again just after the driver's monitor had readied it: with
32 users retrying on a busy machine, the agent answered nobody for over a minute after
the database was back (``tests/api/test_crash_under_load.py``; docs/storage.md, "When the
database goes away")."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from pymongo.monitoring import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)

from agent.state.models import utc_now
from agent.store import StoreUnavailable
from agent.store.mongo import MongoStore
from tests.support.mongo_server import ferretdb_available, mongodb_required, running_ferretdb

pytestmark = pytest.mark.skipif(
    not ferretdb_available() and not mongodb_required(),
    reason="killing the server needs FerretDB, built with Go: install Go 1.24+",
)

USERS = 32


class Commands(CommandListener):
    """The commands the store's client sent, in order, each with how it ended."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, str]] = []

    def started(self, event: CommandStartedEvent) -> None:
        pass

    def succeeded(self, event: CommandSucceededEvent) -> None:
        self.ended.append((event.command_name, "ok"))

    def failed(self, event: CommandFailedEvent) -> None:
        self.ended.append((event.command_name, "failed"))


async def test_calls_wait_for_one_probe_while_the_server_is_away_then_all_are_answered() -> None:
    commands = Commands()
    with running_ferretdb() as db:
        store = await MongoStore.open(f"{db.url}chorus_outage", event_listeners=[commands])
        try:
            lease = utc_now() + timedelta(seconds=30)
            for n in range(USERS):
                await store.queues.leave(await store.queues.take_place(f"user{n}", lease))
            db.kill()
            with pytest.raises(StoreUnavailable):
                await store.queues.running_turn("user0")
            db.start()
            commands.ended.clear()
            # The first command sent once it is back is the probe's; the burst after it is
            # answered, none failing on a paused pool.
            places = await asyncio.gather(
                *(store.queues.take_place(f"user{n}", lease) for n in range(USERS))
            )
            sent = list(commands.ended)  # not the client's endSessions as it closes
        finally:
            await store.close()
    assert [p.first for p in places] == [True] * USERS
    assert sent[0] == ("ping", "ok"), sent[:5]
    assert sent[1:] == [("findAndModify", "ok")] * USERS, sent
