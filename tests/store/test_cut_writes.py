"""The database going away at each write of a user's first dialog on MongoDB (its opening,
a turn, a rating, its close, the next dialog's opening), one write at a time: the
connection is cut before the write reaches the server, or after the server applied it and
before its reply came back. The client is told 503 and sends the same message again (with
an idempotency key or without); whatever the cut-short write had stored, the user's
dialogs read back whole: each message once, its answer once, the rating kept, the first
dialog closed, both listed under the user. (SQLite writes each of those in one
transaction: nothing is half-stored.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from pymongo import AsyncMongoClient
from pymongo.errors import AutoReconnect

from agent.flow import Incoming, MessageFlow
from agent.idempotency import KeyInFlight, fingerprint
from agent.state.models import BotUtterance
from agent.store.base import Store, StoreUnavailable
from agent.store.mongo import MongoStore
from tests.store.test_lost_reply import echo_flow

#: The queue's and the keys' lease (``CHORUS_QUEUE_LEASE``): a place or a claim whose
#: write was applied and whose reply was cut is held that long by nobody.
LEASE = 1.0
#: How long a message may take to be answered, retries included (a lease or two on an idle
#: machine; a busy one may stall the event loop for seconds).
PATIENCE = 60.0

#: A collection's methods that write.
_WRITES = frozenset(
    {
        "insert_one",
        "insert_many",
        "update_one",
        "update_many",
        "replace_one",
        "delete_one",
        "delete_many",
        "find_one_and_update",
        "find_one_and_delete",
        "bulk_write",
    }
)
#: The commands sent by name that write.
_WRITE_COMMANDS = frozenset({"insert", "update", "delete", "findAndModify", "bulkWrite"})


class Cut:
    """Where the connection is cut: at the ``at``-th write from when it was armed (counted
    from 0), ``before`` the server gets it or after it applied it; once."""

    def __init__(self) -> None:
        self.at: int | None = None
        self.before = True
        self.writes = 0

    def arm(self, at: int, *, before: bool) -> None:
        self.at, self.before, self.writes = at, before, 0

    async def write(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.at is None:
            return await call(*args, **kwargs)
        due = self.writes == self.at
        self.writes += 1
        if not due:
            return await call(*args, **kwargs)
        self.at = None
        if not self.before:
            await call(*args, **kwargs)  # the write reached the server...
        raise AutoReconnect("connection closed")  # ...its reply did not


class _Collection:
    def __init__(self, collection: Any, cut: Cut) -> None:
        self._collection, self._cut = collection, cut

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if name not in _WRITES:
            return attribute
        return lambda *a, **k: self._cut.write(attribute, *a, **k)


class _Database:
    def __init__(self, db: Any, cut: Cut) -> None:
        self._db, self._cut = db, cut

    def __getitem__(self, name: str) -> _Collection:
        return _Collection(self._db[name], self._cut)

    def command(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        name = next(iter(command)) if isinstance(command, dict) else command
        if name in _WRITE_COMMANDS:
            return self._cut.write(self._db.command, command, *args, **kwargs)
        return self._db.command(command, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


class _Client:
    def __init__(self, client: AsyncMongoClient[Any], cut: Cut) -> None:
        self._client, self._cut = client, cut

    @property
    def admin(self) -> _Database:
        return _Database(self._client.admin, self._cut)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture
async def cut_store(store_url: str) -> AsyncIterator[tuple[Store, Cut]]:
    """A MongoDB store whose every write goes through a :class:`Cut`: the real store's
    code and server, with the connection cut where a test says."""
    opened = await MongoStore.open(store_url)
    try:
        cut = Cut()
        m = opened._m
        yield (
            MongoStore(
                _Client(m.client, cut),  # type: ignore[arg-type]
                _Database(m.db, cut),  # type: ignore[arg-type]
                point_reads=m.point_reads,
                bulk_write=m.bulk_write,
            ),
            cut,
        )
    finally:
        await opened.close()


async def said(store: Store, user_id: str) -> list[str]:
    dialogs = await store.reader.user_dialogs(user_id)
    assert dialogs is not None
    return [u.text for d in dialogs for u in d.utterances]


async def reply_until_answered(flow: MessageFlow, incoming: Incoming) -> str:
    """The client's retries: a 503 is sent again at once (the cut happens once), a 409 (a
    claim whose reply was cut, held until its lease runs out) after a client's back-off."""
    deadline = asyncio.get_running_loop().time() + PATIENCE
    while asyncio.get_running_loop().time() < deadline:
        try:
            answer = await flow.reply(incoming)
        except StoreUnavailable:
            continue
        except KeyInFlight:
            await asyncio.sleep(0.05)  # a client's back-off before its retry
            continue
        assert answer.result is not None
        return answer.result.bot_utterance.text
    raise AssertionError(f"{incoming.text!r} was never answered in {PATIENCE} s")


@pytest.mark.parametrize("store_url", ["mongodb", "mongodb-8"], indirect=True)
@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
@pytest.mark.parametrize("before", [True, False], ids=["write-lost", "reply-lost"])
async def test_a_cut_at_any_write_of_a_dialog_loses_and_doubles_nothing(
    tmp_path: Path, cut_store: tuple[Store, Cut], keyed: bool, before: bool
) -> None:
    store, cut = cut_store
    async with AsyncExitStack() as closing:
        flow = await echo_flow(tmp_path, store, closing, lease=LEASE, end_retry=0)
        at = 0
        while True:
            user = f"user{at}"

            def message(text: str, turn: int, user: str = user, **more: Any) -> Incoming:
                if not keyed:
                    return Incoming(user, text, **more)
                body = {"user_id": user, "payload": text, **more}
                key = f"chat:{user}-{turn}"
                return Incoming(user, text, key=key, fingerprint=fingerprint(body), **more)

            cut.arm(at, before=before)
            first = await reply_until_answered(flow, message("hi", 0))
            # rates the first answer and closes the dialog once answered
            second = await reply_until_answered(
                flow, message("bye", 1, reward=1.0, close_after=True)
            )
            third = await reply_until_answered(flow, message("hello again", 2))
            reached = cut.at is not None  # the cut was never due: past the last write
            cut.at = None
            dialogs = await store.reader.user_dialogs(user)
            assert dialogs is not None
            assert [[u.text for u in d.utterances] for d in dialogs] == [
                ["hi", first, "bye", second],
                ["hello again", third],
            ], f"cut at write {at}"
            assert [d.date_finish is not None for d in dialogs] == [True, False]
            ratings = [u.rating for u in dialogs[0].utterances if isinstance(u, BotUtterance)]
            assert ratings == [1.0, None], f"cut at write {at}"
            if reached:
                break
            at += 1
        assert at > 4, "fewer writes than a turn makes: the cut did not reach the store"
