"""A turn's end whose write reached the database while the connection died before the
reply did, and the database stayed away longer than the flow writes the end again: the
client is told 503 and sends the same message again, without an idempotency key (the way
test_crash_under_load.py's unkeyed users do). The message is stored and answered once,
whatever of the end the cut-short write had stored, on every store. And a message that
closes its dialog whose key's record of the answer was cut short in the same way."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, cast

import pytest

from agent.flow import END_RETRY, Incoming, MessageFlow
from agent.idempotency import IdempotencyKeys, KeyInFlight, fingerprint
from agent.queues import UserQueues
from agent.state.models import HumanUtterance, Utterance
from agent.store.base import (
    KeyStore,
    Place,
    Store,
    StoreUnavailable,
    TurnEnd,
    TurnStart,
    TurnStore,
)
from tests.turn.services import CALLS
from tests.turn.test_direct import chorus, executor_of, loaded


class LostReplies:
    """The flow's turn store, with the database "going away" at a turn's end: the end's
    write is applied (``applied``) or not, then the connection dies before its reply, and
    every write again fails while ``down``: the real store underneath, nothing faked but
    the lost reply."""

    def __init__(self, store: Store, *, applied: bool) -> None:
        self._turns = store.turns
        self.applied = applied
        self.down = False

    async def open_turn(
        self,
        user_id: str,
        channel_type: str,
        limit: int,
        arm: str | None = None,
        *,
        seen: Mapping[str, Any] | None = None,
        whole: bool = True,
    ) -> TurnStart:
        return await self._turns.open_turn(
            user_id, channel_type, limit, arm, seen=seen, whole=whole
        )

    async def utterances(self, utt_ids: Sequence[str]) -> list[Utterance]:
        return await self._turns.utterances(utt_ids)

    async def keyed_turn(self, dialog_id: str, key: str) -> list[Utterance]:
        return await self._turns.keyed_turn(dialog_id, key)

    async def last_closed_dialog(self, user_id: str) -> str | None:
        return await self._turns.last_closed_dialog(user_id)

    async def add_utterance(
        self, dialog_id: str, utterance: HumanUtterance, place: Place | None = None
    ) -> None:
        await self._turns.add_utterance(dialog_id, utterance, place)

    async def finish_turn(self, end: TurnEnd, *, retrying: bool = False) -> None:
        if not self.down:
            await self._turns.finish_turn(end, retrying=retrying)
            return
        if self.applied and not retrying:
            await self._turns.finish_turn(end)  # the write reached the server...
        raise StoreUnavailable("connection closed")  # ...its reply did not

    async def mark_interrupted(self, utt_id: str) -> None:
        await self._turns.mark_interrupted(utt_id)

    async def close_active_dialog(self, user_id: str) -> str | None:
        return await self._turns.close_active_dialog(user_id)


async def echo_flow(
    tmp_path: Path,
    store: Store,
    closing: AsyncExitStack,
    *,
    turns: TurnStore | None = None,
    keys: KeyStore | None = None,
    lease: float = 10.0,
    end_retry: float = END_RETRY,
) -> MessageFlow:
    """The message flow over ``store`` (its ``turns`` and ``keys`` when given instead: a
    store with lost replies) and an echo skill, its queue's and keys' lease ``lease``;
    ``end_retry`` 0: the database stays away longer than the end is written again."""
    executor = await executor_of(loaded(tmp_path, "p", chorus("echo")), closing)
    queues = UserQueues(store.queues, lease=lease)
    claims = IdempotencyKeys(keys or store.keys, lease=lease)
    closing.push_async_callback(queues.aclose)
    closing.push_async_callback(claims.aclose)
    return MessageFlow(
        turns or store.turns,
        executor,
        "http_client",
        ratings=store.ratings,
        queues=queues,
        keys=claims,
        end_retry=end_retry,
    )


async def said(store: Store, user_id: str) -> list[str]:
    dialogs = await store.reader.user_dialogs(user_id)
    assert dialogs is not None
    return [u.text for d in dialogs for u in d.utterances]


@pytest.mark.parametrize("applied", [True, False], ids=["end-stored", "end-lost"])
async def test_a_message_sent_again_after_a_lost_turn_end_is_stored_once(
    tmp_path: Path, store: Store, applied: bool
) -> None:
    async with AsyncExitStack() as closing:
        turns = LostReplies(store, applied=applied)
        flow = await echo_flow(tmp_path, store, closing, turns=turns, end_retry=0)
        await flow.reply(Incoming("ann", "hi"))
        turns.down = True
        with pytest.raises(StoreUnavailable):
            await flow.reply(Incoming("ann", "how are you"))
        turns.down = False
        calls = CALLS["echo"]
        answer = await flow.reply(Incoming("ann", "how are you"))  # the client's retry
        assert answer.result is not None
        assert answer.result.bot_utterance.text == "echo: how are you (after echo: hi (after -))"
        assert await said(store, "ann") == [
            "hi",
            "echo: hi (after -)",
            "how are you",
            "echo: how are you (after echo: hi (after -))",
        ]
        # the stored answer sent back, or the stored message answered now: once
        assert CALLS["echo"] == calls + (0 if applied else 1)
        # The user saying it again after the answer came is a message of its own.
        await flow.reply(Incoming("ann", "how are you"))
        again = await said(store, "ann")
        assert again[4:] == ["how are you", f"echo: how are you (after {again[3]})"]


class LostRecords:
    """The keys' store, with the reply to the first record of an answer lost: applied
    (``applied``) or not, the connection dies before its reply."""

    def __init__(self, keys: KeyStore, *, applied: bool) -> None:
        self._keys = keys
        self.applied = applied
        self.lost = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._keys, name)

    async def complete_key(self, user_id: str, key: str, reply: dict[str, Any]) -> None:
        if self.lost:
            await self._keys.complete_key(user_id, key, reply)
            return
        self.lost = True
        if self.applied:
            await self._keys.complete_key(user_id, key, reply)
        raise StoreUnavailable("connection closed")


@pytest.mark.parametrize("applied", [True, False], ids=["record-stored", "record-lost"])
async def test_a_closing_message_whose_answer_was_not_recorded_is_answered_once(
    tmp_path: Path, store: Store, applied: bool
) -> None:
    """A keyed message that closes its dialog (``close_after``): the turn is stored and the
    dialog closed, then the database goes away before the key records the answer. The
    client's retry (409 until the claim's lease runs out) gets the stored answer, and
    opens no dialog: the user's next message does."""
    async with AsyncExitStack() as closing:
        lost = LostRecords(store.keys, applied=applied)
        flow = await echo_flow(tmp_path, store, closing, keys=cast(KeyStore, lost), lease=1.0)
        body = {"user_id": "ann", "payload": "bye", "close_after": True}
        bye = Incoming("ann", "bye", key="chat:1", fingerprint=fingerprint(body), close_after=True)
        await flow.reply(Incoming("ann", "hi"))
        with pytest.raises(StoreUnavailable):
            await flow.reply(bye)
        calls = CALLS["echo"]
        while True:  # the client's retries
            try:
                answer = await flow.reply(bye)
                break
            except KeyInFlight:
                await asyncio.sleep(0.05)  # a client's back-off before its retry
        assert answer.result is not None
        assert answer.result.bot_utterance.text == "echo: bye (after echo: hi (after -))"
        assert CALLS["echo"] == calls  # sent back, not answered again
        await flow.reply(Incoming("ann", "hello again"))
        dialogs = await store.reader.user_dialogs("ann")
        assert dialogs is not None
        assert [[u.text for u in d.utterances] for d in dialogs] == [
            ["hi", "echo: hi (after -)", "bye", "echo: bye (after echo: hi (after -))"],
            ["hello again", "echo: hello again (after -)"],
        ]
        assert [d.date_finish is not None for d in dialogs] == [True, False]
