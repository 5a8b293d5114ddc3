"""A turn's end whose write reached the database while the connection died before the
reply did, and the database stayed away longer than the flow writes the end again: the
client is told 503 and sends the same message again, without an idempotency key (the way
test_crash_under_load.py's unkeyed users do). The message is stored and answered once,
whatever of the end the cut-short write had stored, on every store."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from agent.flow import Incoming, MessageFlow
from agent.idempotency import IdempotencyKeys
from agent.queues import UserQueues
from agent.state.models import HumanUtterance, Utterance
from agent.store.base import Place, Store, StoreUnavailable, TurnEnd, TurnStart
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
    ) -> TurnStart:
        return await self._turns.open_turn(user_id, channel_type, limit, arm, seen=seen)

    async def keyed_turn(self, dialog_id: str, key: str) -> list[Utterance]:
        return await self._turns.keyed_turn(dialog_id, key)

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


async def said(store: Store, user_id: str) -> list[str]:
    dialogs = await store.reader.user_dialogs(user_id)
    assert dialogs is not None
    return [u.text for d in dialogs for u in d.utterances]


@pytest.mark.parametrize("applied", [True, False], ids=["end-stored", "end-lost"])
async def test_a_message_sent_again_after_a_lost_turn_end_is_stored_once(
    tmp_path: Path, store: Store, applied: bool
) -> None:
    async with AsyncExitStack() as closing:
        executor = await executor_of(loaded(tmp_path, "p", chorus("echo")), closing)
        queues, keys = UserQueues(store.queues), IdempotencyKeys(store.keys)
        closing.push_async_callback(queues.aclose)
        closing.push_async_callback(keys.aclose)
        turns = LostReplies(store, applied=applied)
        flow = MessageFlow(
            turns,
            executor,
            "http_client",
            ratings=store.ratings,
            queues=queues,
            keys=keys,
            end_retry=0,  # the database stays away longer than the end is written again
        )
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
