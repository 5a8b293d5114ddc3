"""A turn's cost on MongoDB does not grow with the dialog, shown by the store's own commands.

A command listener on the store's client counts, per turn, the commands sent, the
documents the server returned (find batches, findAndModify values) and the documents the
commands wrote (inserts, updates). Turn 500 of one dialog must cost no more than turn 5,
and no stored document may grow with the dialog.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from pymongo import AsyncMongoClient
from pymongo.monitoring import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)

from agent.state.models import BotUtterance, HumanUtterance, Hypothesis, utc_now
from agent.store import StoreUnavailable
from agent.store.base import TurnEnd
from agent.store.mongo import MongoStore
from tests.store.conftest import mongo_store
from tests.store.reads import last_utterances, opened
from tests.support.ports import free_port

TURNS = 500
WINDOW = 3
#: Documents counted per write command: what each one carries.
_WRITTEN = {"insert": "documents", "update": "updates", "delete": "deletes"}


@dataclass
class Cost:
    commands: int = 0
    read: int = 0
    written: int = 0
    names: list[str] = field(default_factory=list)


class Counter(CommandListener):
    """Tallies the commands of whatever runs between two :meth:`take` calls."""

    def __init__(self) -> None:
        self.cost = Cost()

    def take(self) -> Cost:
        cost, self.cost = self.cost, Cost()
        return cost

    def started(self, event: CommandStartedEvent) -> None:
        self.cost.commands += 1
        self.cost.names.append(event.command_name)
        if event.command_name in _WRITTEN:
            self.cost.written += len(event.command.get(_WRITTEN[event.command_name], ()))
        elif event.command_name == "findAndModify":
            self.cost.written += 1

    def succeeded(self, event: CommandSucceededEvent) -> None:
        reply: Any = event.reply
        cursor = reply.get("cursor") or {}
        self.cost.read += len(cursor.get("firstBatch", ())) + len(cursor.get("nextBatch", ()))
        if event.command_name == "findAndModify" and reply.get("value") is not None:
            self.cost.read += 1

    def failed(self, event: CommandFailedEvent) -> None:
        pass


async def agent_turn(store: MongoStore, i: int) -> None:
    """What agent/flow.py does for one message, with fixed-width texts and values so a
    document's size can only change if the store makes it grow."""
    place = await store.queues.take_place("long-talker", utc_now() + timedelta(seconds=30))
    assert place.first
    start = await store.turns.open_turn("long-talker", "http_client", WINDOW, seen=place.seen)
    assert len(start.history) == min(WINDOW, 2 * (i - 1))
    human, dialog = start.human, start.dialog
    utterance = HumanUtterance(text=f"message {i:04d}", user=human.model_dump(mode="json"))
    await store.turns.add_utterance(dialog.dialog_id, utterance)
    utterance.annotations = {"tokens": ["message", f"{i:04d}"]}
    utterance.hypotheses = [Hypothesis(skill_name="echo", text=f"answer {i:04d}", confidence=0.5)]
    bot = BotUtterance(text=f"answer {i:04d}", active_skill="echo", confidence=0.5)
    await store.turns.finish_turn(
        TurnEnd(
            dialog.dialog_id,
            human.id,
            utterance,
            bot,
            {"last_turn": i},
            {"last_turn": i},
            leave=place,
        )
    )
    assert place.left


async def largest_documents(url: str) -> dict[str, int]:
    """The BSON size of the largest document of each collection."""
    raw: CodecOptions[RawBSONDocument] = CodecOptions(document_class=RawBSONDocument)
    client: AsyncMongoClient[RawBSONDocument] = AsyncMongoClient(
        url, document_class=RawBSONDocument
    )
    try:
        db = client.get_default_database()
        sizes = {}
        for name in ("users", "dialogs", "utterances"):
            docs = await db.get_collection(name, codec_options=raw).find().to_list()
            sizes[name] = max((len(doc.raw) for doc in docs), default=0)
        return sizes
    finally:
        await client.close()


# FerretDB 1.x filters every non-_id query by scanning the collection; a turn reads by
# _id only, but the 500 turns take a while there.
@pytest.mark.timeout(900)
async def test_turn_500_costs_no_more_than_turn_5(mongodb_url: str) -> None:
    counter = Counter()
    async with mongo_store(mongodb_url, (counter,)) as (store, url):
        costs: dict[int, Cost] = {}
        sizes: dict[int, dict[str, int]] = {}
        for i in range(1, TURNS + 1):
            counter.take()
            await agent_turn(store, i)
            costs[i] = counter.take()
            if i in (5, TURNS):
                sizes[i] = await largest_documents(url)

        early, late = costs[5], costs[TURNS]
        assert late.commands <= early.commands, (early.names, late.names)
        assert late.read <= early.read
        assert late.written <= early.written
        # The same work each turn: the window is full from turn 3 on.
        assert late.names == early.names
        # the user's document (returned by taking the place in the queue), then the window
        assert early.read == 1 + WINDOW
        # No document grows with the dialog: the user's document keeps counters and the
        # open dialog's attributes, the dialog's document its head, never the utterances.
        # An utterance's id holds its number, so ids are a digit longer at 1000 than at 10.
        assert {k: v for k, v in sizes[TURNS].items() if k != "utterances"} == {
            k: v for k, v in sizes[5].items() if k != "utterances"
        }
        grown = sizes[TURNS]["utterances"] - sizes[5]["utterances"]
        assert 0 <= grown <= len(str(2 * TURNS)) - len(str(2 * 5))
        window = await last_utterances(
            store,
            ((await opened(store, "long-talker", "http_client")).dialog).dialog_id,
            WINDOW,
        )
        assert [u.text for u in window] == [
            f"answer {TURNS - 1:04d}",
            f"message {TURNS:04d}",
            f"answer {TURNS:04d}",
        ]
        # Longer than a dialog read by _id on FerretDB: the whole dialog is still read.
        (whole,) = await store.reader.user_dialogs("long-talker") or []
        assert [u.text for u in whole.utterances] == [
            text for i in range(1, TURNS + 1) for text in (f"message {i:04d}", f"answer {i:04d}")
        ]
        assert whole.bot.attributes == {"last_turn": TURNS}


async def test_an_unanswered_utterance_is_in_the_next_window(mongodb_url: str) -> None:
    """An attempt that stored its human utterance and died before the answer: the next
    turn sees that utterance (to answer it, or to keep it before the new one), and the
    dialog keeps every utterance in order."""
    async with mongo_store(mongodb_url) as (store, _):
        await agent_turn(store, 1)
        place = await store.queues.take_place("long-talker", utc_now() + timedelta(seconds=30))
        start = await store.turns.open_turn("long-talker", "http_client", WINDOW, seen=place.seen)
        await store.turns.add_utterance(start.dialog.dialog_id, HumanUtterance(text="lost"))
        await store.queues.leave(place)  # the agent's place was given up; no answer was stored
        place = await store.queues.take_place("long-talker", utc_now() + timedelta(seconds=30))
        start = await store.turns.open_turn("long-talker", "http_client", WINDOW, seen=place.seen)
        assert [u.text for u in start.history] == ["message 0001", "answer 0001", "lost"]
        await store.queues.leave(place)
        await agent_turn_after_loss(store, start.dialog.dialog_id)
        dialog = await store.reader.dialog(start.dialog.dialog_id)
    assert dialog is not None
    assert [u.text for u in dialog.utterances] == [
        "message 0001",
        "answer 0001",
        "lost",
        "again",
        "answer",
    ]


async def agent_turn_after_loss(store: MongoStore, dialog_id: str) -> None:
    place = await store.queues.take_place("long-talker", utc_now() + timedelta(seconds=30))
    start = await store.turns.open_turn("long-talker", "http_client", WINDOW, seen=place.seen)
    utterance = HumanUtterance(text="again")
    await store.turns.add_utterance(dialog_id, utterance)
    answer = BotUtterance(text="answer", active_skill="echo", confidence=1.0)
    await store.turns.finish_turn(
        TurnEnd(dialog_id, start.human.id, utterance, answer, {}, {}, leave=place)
    )


async def test_the_queue_stays_small_and_costs_the_same_at_place_100(
    mongodb_url: str,
) -> None:
    """Each message of a user takes a place in the user's queue; the queue must neither
    grow with the messages nor get slower to take a place in."""
    counter = Counter()
    async with mongo_store(mongodb_url, (counter,)) as (store, url):
        costs: dict[int, Cost] = {}
        sizes: dict[int, int] = {}
        for expected in range(101):
            counter.take()
            place = await store.queues.take_place("long-talker", utc_now() + timedelta(seconds=30))
            assert (place.number, place.first) == (expected, True)
            await store.queues.leave(place)
            costs[expected] = counter.take()
            if expected in (10, 100):
                sizes[expected] = (await largest_documents(url))["users"]
    assert costs[100].names == costs[10].names == ["findAndModify", "update"]
    assert costs[100].read == costs[10].read
    assert sizes[100] == sizes[10]


async def test_an_unreachable_mongodb_fails_fast_as_store_unavailable() -> None:
    url = f"mongodb://127.0.0.1:{free_port()}/chorus?serverSelectionTimeoutMS=300"
    # The URL's bound (300 ms) fails it; PyMongo's own (30 s) would reach this one first.
    with pytest.raises(StoreUnavailable):
        async with asyncio.timeout(20):
            await MongoStore.open(url)
    # PyMongo 4.20 leaks the socket of a monitor check cancelled by close() mid-connect
    # (pool_shared._async_create_connection closes it on OSError and TimeoutError only);
    # collect it here, quietly, rather than have its ResourceWarning fail a later test.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
