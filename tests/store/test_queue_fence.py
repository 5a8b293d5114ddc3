"""Two turns of one user never overlap on the stored state: the MongoDB queue's free-queue
fast path cannot seat two messages at once, and a turn whose place was passed over (its
agent stalled past its lease) cannot store its end on top of the turn that took over."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

from agent.state.models import utc_now
from agent.store.mongo.errors import Doc
from tests.store.conftest import mongo_store


def soon(seconds: float = 30.0) -> datetime:
    return utc_now() + timedelta(seconds=seconds)


async def test_a_place_counted_as_the_queue_frees_keeps_the_next_message_waiting(
    mongodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message finds the queue busy, the running turn leaves (the queue is free), then
    the message counts its place and is first. A third message arriving before the second
    put its lease on the queue must wait for it, not take the free queue's fast path as
    first as well."""
    async with mongo_store(mongodb_url) as (store, _):
        queues = store.queues
        running = await queues.take_place("ann", soon())
        assert running.first
        counting, counted = asyncio.Event(), asyncio.Event()
        count_now, hold_now = asyncio.Event(), asyncio.Event()
        count_place, hold = queues._count_place, queues._hold

        async def gated_count(*args: Any) -> Doc:
            counting.set()
            await count_now.wait()
            return await count_place(*args)

        async def gated_hold(*args: Any) -> bool:
            counted.set()
            await hold_now.wait()
            return await hold(*args)

        monkeypatch.setattr(queues, "_count_place", gated_count)
        monkeypatch.setattr(queues, "_hold", gated_hold)
        second = asyncio.create_task(queues.take_place("ann", soon()))
        await counting.wait()  # the fast path failed: the queue was busy
        await queues.leave(running)  # nobody had counted a place behind: the queue is free
        count_now.set()
        await counted.wait()  # counted and first; its lease is not on the queue yet
        monkeypatch.undo()
        third = await queues.take_place("ann", soon())
        hold_now.set()
        second_place = await second
        assert second_place.first
        assert not third.first, "two messages of one user were both told to start"
        assert not await queues.first_in_queue(third, utc_now())
        await queues.leave(second_place)
        assert await queues.first_in_queue(third, utc_now())
