"""MongoDB 8's turn end (one ``bulkWrite``) where the server only says it has one.

The store picks the 4-command turn by the server's wire version; the contract suite and
the command count run it on a server with ``bulkWrite`` (``mongodb_8_url``). This is the
case a wire version cannot tell: a server in front of MongoDB (a proxy, a compatible
service) that reports MongoDB 8 but refuses the command.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from agent.state.models import BotUtterance, HumanUtterance
from agent.store.base import TurnEnd
from agent.store.mongo import MongoStore
from tests.store.conftest import mongo_store
from tests.store.reads import opened


async def test_a_server_claiming_mongodb_8_without_bulk_write_still_stores_turns(
    mongodb_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that reports MongoDB 8's wire version but has no ``bulkWrite`` (a proxy,
    a compatible service) costs a warning, not the turn: the turn's end is written in two
    commands, that turn and every later one."""
    async with mongo_store(mongodb_url) as (reader, url):
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(url, tz_aware=True)
        store = MongoStore(client, client.get_default_database(), bulk_write=True)
        try:
            start = await opened(store, "alice", "http_client")
            human, dialog = start.human, start.dialog
            for i in range(2):
                utterance = HumanUtterance(text=f"hello {i}", user=human.model_dump(mode="json"))
                await store.turns.add_utterance(dialog.dialog_id, utterance)
                bot = BotUtterance(
                    text=f"hi {i}", orig_text=f"hi {i}", active_skill="echo", confidence=0.5
                )
                with caplog.at_level(logging.WARNING, logger="chorus.store"):
                    await store.turns.finish_turn(
                        TurnEnd(dialog.dialog_id, human.id, utterance, bot, {}, {})
                    )
            warnings = [r for r in caplog.records if "no bulkWrite" in r.getMessage()]
            assert len(warnings) == 1
            stored = await reader.reader.dialog(dialog.dialog_id)
            assert stored is not None
            assert [u.text for u in stored.utterances] == ["hello 0", "hi 0", "hello 1", "hi 1"]
        finally:
            await client.close()


async def test_a_turn_end_too_large_for_one_command_is_written_in_two(
    mongodb_8_url: str,
) -> None:
    """The annotated utterance and the user's attributes each under MongoDB's 16 MB, the
    two together over it: one ``bulkWrite`` cannot carry them, two commands can, and the
    turn is kept whole."""
    async with mongo_store(mongodb_8_url) as (store, _):
        start = await opened(store, "alice", "http_client")
        human, dialog = start.human, start.dialog
        utterance = HumanUtterance(text="hello", user=human.model_dump(mode="json"))
        await store.turns.add_utterance(dialog.dialog_id, utterance)
        utterance.annotations = {"summary": "a" * 9_000_000}
        bot = BotUtterance(text="hi", orig_text="hi", active_skill="echo", confidence=1)
        notes = {"notes": "n" * 8_000_000}
        await store.turns.finish_turn(
            TurnEnd(dialog.dialog_id, human.id, utterance, bot, notes, {})
        )
        stored = await store.reader.dialog(dialog.dialog_id)
        assert stored is not None
        annotated, answer = stored.utterances
        assert annotated.annotations == {"summary": "a" * 9_000_000}
        assert answer.text == "hi" and answer.utt_id == bot.utt_id
        assert stored.human.attributes == notes
