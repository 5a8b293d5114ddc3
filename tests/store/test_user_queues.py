"""The per-user queue every store keeps (``take_place``/``first_in_queue``/``leave``), on
SQLite and on MongoDB, and :class:`agent.queues.UserQueues` built on it."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from agent.queues import QueueTimeout, UserQueues
from agent.state.models import HumanUtterance, utc_now
from agent.store import QueueStore, Store
from agent.store.base import Place
from tests.store.reads import opened


def soon(seconds: float = 30.0):  # type: ignore[no-untyped-def]
    return utc_now() + timedelta(seconds=seconds)


async def take(store: Store, user: str, lease_until: datetime | None = None) -> Place:
    return await store.queues.take_place(user, lease_until or soon())


async def test_places_follow_arrival_and_only_the_first_may_start(store: Store) -> None:
    first, second, third = [await take(store, "ann") for _ in range(3)]
    assert [(p.number, p.first) for p in (first, second, third)] == [
        (0, True),
        (1, False),
        (2, False),
    ]
    assert not await store.queues.first_in_queue(second, utc_now())
    await store.queues.leave(first)
    assert await store.queues.first_in_queue(second, utc_now())
    assert not await store.queues.first_in_queue(third, utc_now())


async def test_a_place_behind_a_running_one_is_not_first_whatever_left_before(
    store: Store,
) -> None:
    """Only places still served count: one left before the running one does not."""
    first, second = await take(store, "ann"), await take(store, "ann")
    await store.queues.leave(first)
    third = await take(store, "ann")
    assert (third.number, third.first) == (2, False)
    await store.queues.leave(second)
    assert await store.queues.first_in_queue(third, utc_now())


async def test_users_have_queues_of_their_own(store: Store) -> None:
    await take(store, "ann")
    assert (await take(store, "bob")).first


async def test_places_keep_growing_after_the_queue_empties(store: Store) -> None:
    for expected in range(40):
        place = await take(store, "ann")
        assert (place.number, place.first) == (expected, True)
        await store.queues.leave(place)


async def test_a_place_whose_lease_ran_out_is_given_up(store: Store) -> None:
    """An agent killed mid-turn never leaves its place; its lease frees the queue."""
    await take(store, "ann", utc_now() + timedelta(seconds=2))
    second = await take(store, "ann")
    assert not await store.queues.first_in_queue(second, utc_now())
    assert await store.queues.first_in_queue(second, utc_now() + timedelta(seconds=3))


async def test_a_message_that_gave_up_waiting_lets_no_one_jump_the_queue(store: Store) -> None:
    """A message that stopped waiting (timed out, client gone) leaves its place, but the
    one behind it must still wait for the turn that is running."""
    first, second, third = [await take(store, "ann") for _ in range(3)]
    await store.queues.leave(second, served=False)
    assert not await store.queues.first_in_queue(third, utc_now())
    await store.queues.leave(first)
    assert await store.queues.first_in_queue(third, utc_now())


async def test_a_message_that_gave_up_as_its_turn_came_lets_the_next_one_in(
    store: Store,
) -> None:
    first, second, third = [await take(store, "ann") for _ in range(3)]
    await store.queues.leave(first)
    await store.queues.leave(second, served=False)
    assert await store.queues.first_in_queue(third, utc_now())
    await store.queues.leave(third)
    assert (await take(store, "ann")).first


async def test_a_renewed_lease_is_not_given_up(store: Store) -> None:
    await take(store, "ann", utc_now() + timedelta(seconds=2))
    second = await take(store, "ann")
    await store.queues.renew_places([("ann", 0)], soon(60))
    assert not await store.queues.first_in_queue(second, utc_now() + timedelta(seconds=3))


async def test_erasing_a_user_empties_their_queue(store: Store) -> None:
    await opened(store, "ann")
    await take(store, "ann")
    assert await store.delete_user("ann")
    place = await take(store, "ann")
    assert (place.number, place.first) == (0, True)


async def test_racing_places_are_distinct_and_one_is_first(store: Store) -> None:
    places = await asyncio.gather(*(take(store, "ann") for _ in range(10)))
    assert sorted(p.number for p in places) == list(range(10))
    assert sum(p.first for p in places) == 1


class PlaceSignals:
    """The real store, telling the test when each message has taken its place."""

    def __init__(self, store: QueueStore) -> None:
        self._store = store
        self.taken = asyncio.Queue[int]()

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def take_place(self, user_id: str, lease_until: datetime) -> Place:
        place = await self._store.take_place(user_id, lease_until)
        self.taken.put_nowait(place.number)
        return place


async def test_user_queues_run_one_turn_at_a_time_in_arrival_order(store: Store) -> None:
    signals = PlaceSignals(store.queues)
    queues = UserQueues(signals, lease=5.0)  # type: ignore[arg-type]
    running: list[int] = []
    order: list[int] = []
    release_first = asyncio.Event()

    async def message(i: int) -> None:
        async with queues.turn("ann"):
            running.append(i)
            assert running == [i], f"turns {running} ran at once"
            if i == 0:
                await release_first.wait()
            await asyncio.sleep(0)  # let the others try to get in
            order.append(i)
            running.remove(i)

    try:
        tasks = []
        for i in range(6):  # each arrives once the previous one has its place
            tasks.append(asyncio.create_task(message(i)))
            assert await signals.taken.get() == i
        release_first.set()
        await asyncio.gather(*tasks)
    finally:
        await queues.aclose()
    assert order == list(range(6))


async def test_a_message_stuck_behind_a_live_one_times_out(store: Store) -> None:
    queues = UserQueues(store.queues, lease=30.0, max_wait=0.3)
    try:
        async with queues.turn("ann"):
            with pytest.raises(QueueTimeout):
                async with queues.turn("ann"):
                    pass
        async with queues.turn("ann"):  # the queue is free again afterwards
            pass
    finally:
        await queues.aclose()


async def test_the_running_turn_is_named_and_can_be_asked_to_stop(store: Store) -> None:
    """What double texting reads and writes (docs/turns.md): the served place and its
    human utterance, and an interrupt that only the served place's agent sees."""
    assert await store.queues.running_turn("ann") is None
    first = await take(store, "ann")
    start = await store.turns.open_turn("ann", "http_client", 2)
    utterance = HumanUtterance(text="first")
    await store.turns.add_utterance(start.dialog.dialog_id, utterance)
    await store.queues.note_turn(first, utterance.utt_id)
    second = await take(store, "ann")
    running = await store.queues.running_turn("ann")
    assert running is not None and running.number == first.number
    assert running.utt_id == utterance.utt_id
    assert await store.queues.interrupted([("ann", first.number)]) == []
    await store.queues.interrupt("ann", first.number)
    assert await store.queues.interrupted([("ann", first.number), ("bob", 0)]) == [
        ("ann", first.number)
    ]
    await store.turns.mark_interrupted(utterance.utt_id)
    await store.queues.leave(first)
    assert await store.queues.first_in_queue(second, utc_now())
    assert await store.queues.interrupted([("ann", second.number)]) == []  # only the place asked
    history = (await store.turns.open_turn("ann", "http_client", 2)).history
    assert [(u.text, isinstance(u, HumanUtterance) and u.interrupted) for u in history] == [
        ("first", True)
    ]
    await store.queues.leave(second)
    assert await store.queues.running_turn("ann") is None


async def test_an_utterance_stored_with_its_place_names_the_running_turn(store: Store) -> None:
    """The flow stores a turn's human utterance and notes it on the turn's place in one
    write: a message refused or interrupting meanwhile names that utterance."""
    first = await take(store, "cy")
    start = await store.turns.open_turn("cy", "http_client", 2)
    utterance = HumanUtterance(text="first")
    await store.turns.add_utterance(start.dialog.dialog_id, utterance, first)
    second = await take(store, "cy")
    running = await store.queues.running_turn("cy")
    assert running is not None and running.number == first.number
    assert running.utt_id == utterance.utt_id
    history = (await store.turns.open_turn("cy", "http_client", 2)).history
    assert [u.text for u in history] == ["first"]
    await store.queues.leave(first)
    await store.queues.leave(second)
