"""Two turns of one user never overlap on the stored state: the MongoDB queue's free-queue
fast path cannot seat two messages at once, and a turn whose place was passed over (its
agent stalled past its lease) cannot store its end on top of the turn that took over."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from agent.state.models import BotUtterance, Dialog, HumanUtterance, Utterance, utc_now
from agent.store import Store
from agent.store.base import Place, PlaceLost, TurnEnd
from agent.store.mongo import turns as turns_module
from agent.store.mongo.errors import Doc
from agent.store.mongo.turn_end import complete_end
from tests.store.conftest import mongo_store
from tests.store.reads import opened


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


async def stalled_turn(store: Store, text: str, key: str | None = None) -> tuple[Place, Turn]:
    """A turn that took the free queue with a lease of 2 s and stored its utterance."""
    place = await store.queues.take_place("ann", utc_now() + timedelta(seconds=2))
    assert place.first
    return place, await started(store, place, text, key)


async def started(store: Store, place: Place, text: str, key: str | None = None) -> Turn:
    start = await store.turns.open_turn("ann", "http_client", 4, seen=place.seen)
    utterance = HumanUtterance(text=text, user=start.human.model_dump(mode="json"), message_key=key)
    await store.turns.add_utterance(start.dialog.dialog_id, utterance)
    return Turn(start.dialog.dialog_id, start.human.id, utterance, start.history)


@dataclass
class Turn:
    """A started turn, as the flow holds it."""

    dialog_id: str
    human_id: str
    utterance: HumanUtterance
    history: list[Utterance]

    def end(self, place: Place, answer: str, **attributes: Any) -> TurnEnd:
        self.utterance.annotations["intents"] = {"seen": True}  # what the services made of it
        bot = BotUtterance(text=answer, active_skill="echo", confidence=0.5)
        return TurnEnd(self.dialog_id, self.human_id, self.utterance, bot, attributes, leave=place)


async def passed_over(store: Store) -> Place:
    """The next message, once the stalled turn's lease has run out: it takes the queue."""
    behind = await store.queues.take_place("ann", soon())
    assert not behind.first
    assert await store.queues.first_in_queue(behind, utc_now() + timedelta(seconds=3))
    return behind


def said(dialog: Dialog) -> list[tuple[str, bool]]:
    return [(u.text, isinstance(u, HumanUtterance) and u.interrupted) for u in dialog.utterances]


async def test_a_turn_passed_over_while_it_ran_stores_nothing_of_its_end(store: Store) -> None:
    """The agent of the first message stalled past its lease; the second message took the
    queue over and read the state the first one read. The first turn's end must not land
    on top of the second's: its answer and attributes are not stored, its utterance stays
    unanswered (marked interrupted, its key dropped so a retry is answered anew)."""
    stalled, slow = await stalled_turn(store, "slow", key="k-slow")
    behind = await passed_over(store)
    fast = await started(store, behind, "fast")
    assert [u.text for u in fast.history] == ["slow"]  # it saw the stalled turn's message
    with pytest.raises(PlaceLost) as lost:
        await store.turns.finish_turn(slow.end(stalled, "late", count=1, stalled=True))
    assert lost.value.utt_id == slow.utterance.utt_id
    assert stalled.left
    await store.turns.finish_turn(fast.end(behind, "quick", count=1))

    human = (await opened(store, "ann")).human
    assert human.attributes == {"count": 1}, "the overtaken turn's update was stored"
    dialog = await store.reader.dialog(slow.dialog_id)
    assert dialog is not None
    assert said(dialog) == [("slow", True), ("fast", False), ("quick", False)]
    first = dialog.utterances[0]
    assert isinstance(first, HumanUtterance)
    assert first.message_key is None and first.annotations == {}
    assert await store.turns.keyed_turn(slow.dialog_id, "k-slow") == []
    # the queue went on with the second message and is free again
    assert (await store.queues.take_place("ann", soon())).first


async def test_a_turn_that_still_holds_its_place_is_stored_when_its_dialog_closed(
    store: Store,
) -> None:
    """The fence refuses only a place passed over: a turn whose dialog was closed while it
    ran (its lease intact) still stores its answer and its user's attributes."""
    place, turn = await stalled_turn(store, "hello")
    assert await store.turns.close_active_dialog("ann") == turn.dialog_id
    await store.turns.finish_turn(turn.end(place, "hi", mood="fine"))
    assert (await opened(store, "ann")).human.attributes == {"mood": "fine"}
    dialog = await store.reader.dialog(turn.dialog_id)
    assert dialog is not None and said(dialog) == [("hello", False), ("hi", False)]
    assert (await store.queues.take_place("ann", soon())).first


class Gate:
    """Holds a store call until the test lets it go, telling the test when it is held."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self.held, self.open = asyncio.Event(), asyncio.Event()

    async def __call__(self, *args: Any) -> Any:
        self.held.set()
        await self.open.wait()
        return await self._call(*args)


async def test_a_passed_over_turn_whose_answer_the_next_turn_completed_stands(
    mongodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MongoDB writes the answer before the user's document. When the message that took
    the queue over read the stalled turn's answer first, it completed that turn's end and
    built on it: the stalled turn then stands (nothing is raised, nothing taken back)."""
    async with mongo_store(mongodb_url) as (store, _):
        stalled, slow = await stalled_turn(store, "slow")
        behind = await passed_over(store)
        end_write = Gate(store.turns._end._update_users)
        monkeypatch.setattr(store.turns._end, "_update_users", end_write)
        finishing = asyncio.create_task(
            store.turns.finish_turn(slow.end(stalled, "late", mood="late"))
        )
        await end_write.held.wait()  # the answer is stored, the user's document not yet
        fast = await started(store, behind, "fast")
        assert [u.text for u in fast.history] == ["slow", "late"]
        end_write.open.set()
        await finishing
        await store.turns.finish_turn(fast.end(behind, "quick", count=1))
        assert (await opened(store, "ann")).human.attributes == {"mood": "late", "count": 1}
        dialog = await store.reader.dialog(slow.dialog_id)
        assert dialog is not None
        assert said(dialog) == [("slow", False), ("late", False), ("fast", False), ("quick", False)]


async def test_a_passed_over_turn_takes_its_answer_back_before_the_next_turn_completes_it(
    mongodb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message that took over read the stalled turn's answer, but the stalled turn
    took it back before that end was completed: the next turn neither completes it nor
    keeps it in its window, and its own utterance takes the freed number."""
    async with mongo_store(mongodb_url) as (store, _):
        stalled, slow = await stalled_turn(store, "slow")
        behind = await passed_over(store)
        end_write = Gate(store.turns._end._update_users)
        monkeypatch.setattr(store.turns._end, "_update_users", end_write)
        completing = Gate(complete_end)
        monkeypatch.setattr(turns_module, "complete_end", completing)
        finishing = asyncio.create_task(
            store.turns.finish_turn(slow.end(stalled, "late", mood="late"))
        )
        await end_write.held.wait()  # the answer is stored, the user's document not yet
        starting = asyncio.create_task(started(store, behind, "fast"))
        await completing.held.wait()  # the next turn read the answer
        end_write.open.set()
        with pytest.raises(PlaceLost):
            await finishing
        completing.open.set()
        fast = await starting
        assert [u.text for u in fast.history] == ["slow"]
        await store.turns.finish_turn(fast.end(behind, "quick", count=1))
        assert (await opened(store, "ann")).human.attributes == {"count": 1}
        dialog = await store.reader.dialog(slow.dialog_id)
        assert dialog is not None
        assert said(dialog) == [("slow", True), ("fast", False), ("quick", False)]
        assert [u.utt_id for u in dialog.utterances] == [
            f"{slow.dialog_id}-{seq}" for seq in range(3)
        ]


async def test_a_turn_that_keeps_its_place_to_close_the_dialog_is_fenced_too(
    store: Store,
) -> None:
    """A turn that closes its dialog after answering keeps its place past its end (then
    leaves it): passed over, its end is refused the same way."""
    stalled, slow = await stalled_turn(store, "slow")
    behind = await passed_over(store)
    fast = await started(store, behind, "fast")
    end = replace(slow.end(stalled, "late", stalled=True), leave=None, keep=stalled)
    with pytest.raises(PlaceLost):
        await store.turns.finish_turn(end)
    await store.turns.finish_turn(fast.end(behind, "quick", count=1))
    assert (await opened(store, "ann")).human.attributes == {"count": 1}
    dialog = await store.reader.dialog(slow.dialog_id)
    assert dialog is not None
    assert said(dialog) == [("slow", True), ("fast", False), ("quick", False)]


async def test_a_turn_that_keeps_its_place_stores_its_end_while_it_holds_it(
    store: Store,
) -> None:
    place, turn = await stalled_turn(store, "bye")
    end = replace(turn.end(place, "goodbye", mood="done"), leave=None, keep=place)
    await store.turns.finish_turn(end)
    assert not place.left  # the caller closes the dialog, then leaves
    assert (await opened(store, "ann")).human.attributes == {"mood": "done"}
    waiting = await store.queues.take_place("ann", soon())
    assert not waiting.first and not await store.queues.first_in_queue(waiting, utc_now())
    await store.queues.leave(place)
    assert await store.queues.first_in_queue(waiting, utc_now())
