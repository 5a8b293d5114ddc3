"""A turn's cost on MongoDB does not grow with the dialog, shown by the store's own commands.

A command listener on the store's client counts, per turn, the commands sent, the
documents the server returned (find batches, findAndModify values) and the documents the
commands wrote (inserts, updates). Turn 500 of one dialog must cost no more than turn 5,
and no stored document may grow with the dialog.
"""

from __future__ import annotations

import gc
import socket
import time
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
from agent.store.mongo import _QUEUE_KEPT, RECENT_IDS, MongoStore
from tests.store.conftest import mongo_store

TURNS = 500
WINDOW = 3
#: The turn from which the dialog's list of newest ids is full (two utterances a turn).
FULL = RECENT_IDS // 2 + 1
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
    """What agent/dialogue.py does for one message, with fixed-width texts and values so a
    document's size can only change if the store makes it grow."""
    human, dialog, history = await store.open_turn("long-talker", "http_client", WINDOW)
    assert len(history) == min(WINDOW, 2 * (i - 1))
    utterance = HumanUtterance(text=f"message {i:04d}", user=human.model_dump(mode="json"))
    await store.add_utterance(dialog.dialog_id, utterance)
    utterance.annotations = {"tokens": ["message", f"{i:04d}"]}
    utterance.hypotheses = [Hypothesis(skill_name="echo", text=f"answer {i:04d}",
                                       confidence=0.5)]
    bot = BotUtterance(text=f"answer {i:04d}", active_skill="echo", confidence=0.5)
    await store.finish_turn(dialog.dialog_id, human.id, utterance, bot,
                            {"last_turn": i}, {"last_turn": i})


async def largest_documents(url: str) -> dict[str, int]:
    """The BSON size of the largest document of each collection."""
    raw: CodecOptions[RawBSONDocument] = CodecOptions(document_class=RawBSONDocument)
    client: AsyncMongoClient[RawBSONDocument] = AsyncMongoClient(
        url, document_class=RawBSONDocument)
    try:
        db = client.get_default_database()
        sizes = {}
        for name in ("users", "dialogs", "utterances"):
            docs = await db.get_collection(name, codec_options=raw).find().to_list()
            sizes[name] = max(len(doc.raw) for doc in docs)
        return sizes
    finally:
        await client.close()


# FerretDB 1.x filters every non-_id query by scanning the collection; the window is read
# by _id, but the other queries make the 500 turns take a minute there.
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
            if i in (5, FULL, TURNS):
                sizes[i] = await largest_documents(url)

        early, late = costs[5], costs[TURNS]
        assert late.commands <= early.commands, (early.names, late.names)
        assert late.read <= early.read
        assert late.written <= early.written
        # The same work each turn: the window is full from turn 3 on.
        assert late.names == early.names
        # the user (naming its open dialog), the dialog (naming its newest utterances and
        # the next utterance number, which the turn's writes use), the window
        assert early.read == 1 + 1 + WINDOW
        # No document grows with the dialog: the dialog keeps a counter and at most
        # RECENT_IDS utterance ids, not its utterances.
        assert sizes[TURNS] == sizes[FULL]
        assert sizes[5]["utterances"] == sizes[TURNS]["utterances"]
        window = await store.recent_utterances((await store.active_dialog(
            await store.human("long-talker"), "http_client")).dialog_id, WINDOW)
        assert [u.text for u in window] == [
            f"answer {TURNS - 1:04d}", f"message {TURNS:04d}", f"answer {TURNS:04d}"]
        # Longer than the ring of newest ids: the whole dialog is still read, in order.
        (whole,) = await store.user_dialogs("long-talker") or []
        assert [u.text for u in whole.utterances] == [
            text for i in range(1, TURNS + 1) for text in (f"message {i:04d}", f"answer {i:04d}")]


async def test_the_window_survives_a_ring_slot_that_was_never_written(
    mongodb_url: str,
) -> None:
    """An insert interrupted before its slot was written (or a dialog stored before the
    ring existed) must not shorten or scramble the window services see."""
    async with mongo_store(mongodb_url) as (store, url):
        for i in range(1, 4):
            await agent_turn(store, i)
        dialog = await store.active_dialog(await store.human("long-talker"), "http_client")
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
        try:
            await client.get_default_database()["dialogs"].update_one(
                {"_id": dialog.dialog_id}, {"$unset": {"recent_ids.4": ""}})
        finally:
            await client.close()
        window = await store.recent_utterances(dialog.dialog_id, 4)
        whole = await store.dialog(dialog.dialog_id)
    assert [u.text for u in window] == ["message 0002", "answer 0002", "message 0003",
                                        "answer 0003"]
    assert whole is not None and [u.text for u in whole.utterances] == [
        text for i in range(1, 4) for text in (f"message {i:04d}", f"answer {i:04d}")]


async def _users_collection_update(url: str, query: dict[str, Any],
                                   update: dict[str, Any]) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
    try:
        await client.get_default_database()["users"].update_one(query, update)
    finally:
        await client.close()


async def test_a_lost_pointer_to_the_open_dialog_finds_it_again(mongodb_url: str) -> None:
    """An agent that died between opening a dialog and pointing the user to it must not
    cost the user their dialog: the next turn goes on in it, and no second one opens."""
    async with mongo_store(mongodb_url) as (store, url):
        for i in range(1, 3):
            await agent_turn(store, i)
        human = await store.human("long-talker")
        opened = await store.active_dialog(human, "http_client")
        await _users_collection_update(url, {"_id": human.id},
                                       {"$unset": {"active_dialog": ""}})
        await agent_turn(store, 3)
        dialogs = await store.user_dialogs("long-talker")
    assert dialogs is not None and [d.dialog_id for d in dialogs] == [opened.dialog_id]
    assert [u.text for u in dialogs[0].utterances][-2:] == ["message 0003", "answer 0003"]


async def test_a_pointer_to_a_closed_dialog_is_not_used(mongodb_url: str) -> None:
    """A pointer left behind by a close that did not finish names a closed dialog: the
    next message opens a new one instead of writing into the closed one."""
    async with mongo_store(mongodb_url) as (store, url):
        await agent_turn(store, 1)
        human = await store.human("long-talker")
        closed = await store.close_active_dialog("long-talker")
        await _users_collection_update(url, {"_id": human.id},
                                       {"$set": {"active_dialog": closed}})
        opened = await store.active_dialog(human, "http_client")
        dialogs = await store.user_dialogs("long-talker")
    assert opened.dialog_id != closed
    assert dialogs is not None and [d.dialog_id for d in dialogs] == [closed, opened.dialog_id]
    assert [u.text for u in dialogs[0].utterances] == ["message 0001", "answer 0001"]
    assert dialogs[0].date_finish is not None and dialogs[1].date_finish is None


async def test_the_line_stays_small_and_costs_the_same_at_place_100(
    mongodb_url: str,
) -> None:
    """Each message of a user takes a place in the user's line; the line must neither
    grow with the messages nor get slower to take a place in."""
    counter = Counter()
    async with mongo_store(mongodb_url, (counter,)) as (store, url):
        costs: dict[int, Cost] = {}
        for expected in range(101):
            counter.take()
            place, first = await store.enqueue("long-talker", utc_now() + timedelta(seconds=30))
            assert (place, first) == (expected, True)
            await store.leave("long-talker", place)
            costs[place] = counter.take()
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url)
        try:
            kept = await client.get_default_database()["turn_queue"].count_documents({})
        finally:
            await client.close()
    assert kept <= _QUEUE_KEPT + 2  # the newest places and where to take the next one
    assert costs[100].names == costs[10].names and costs[100].read == costs[10].read


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_an_unreachable_mongodb_fails_fast_as_store_unavailable() -> None:
    url = f"mongodb://127.0.0.1:{_closed_port()}/chorus?serverSelectionTimeoutMS=300"
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        await MongoStore.open(url)
    assert time.monotonic() - started < 5
    # PyMongo 4.20 leaks the socket of a monitor check cancelled by close() mid-connect
    # (pool_shared._async_create_connection closes it on OSError and TimeoutError only);
    # collect it here, quietly, rather than have its ResourceWarning fail a later test.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
