"""The store's part of dp-agent's API, on every store: pages of dialog ids, finding a
dialog by the prefix a dp-agent ``_id`` carries, and ratings appended in dp-agent's form
that no turn, close or earlier value loses."""

from __future__ import annotations

from typing import Any

from agent.state.models import BotUtterance, HumanUtterance
from agent.store import Store
from agent.store.base import TurnEnd
from tests.store.reads import last_utterances, opened


async def answered(
    store: Store, user: str, bot_attributes: dict[str, Any] | None = None
) -> tuple[str, str]:
    """One turn; the dialog's id and the bot utterance's."""
    start = await opened(store, user, "http_client")
    human, dialog = start.human, start.dialog
    utterance = HumanUtterance(text="hi")
    await store.turns.add_utterance(dialog.dialog_id, utterance)
    bot = BotUtterance(
        text="ok", active_skill="echo", confidence=1.0, attributes=bot_attributes or {}
    )
    await store.turns.finish_turn(TurnEnd(dialog.dialog_id, human.id, utterance, bot, {}, {}))
    return dialog.dialog_id, bot.utt_id


def entry(rating: Any, user: str | None = None) -> dict[str, Any]:
    return {"rating": rating, "user_external_id": user, "datetime": "2026-01-02 03:04:05.000006"}


async def test_dialog_ids_come_in_opening_order_a_page_at_a_time(store: Store) -> None:
    first, _ = await answered(store, "ann")
    await store.turns.close_active_dialog("ann")
    second, _ = await answered(store, "bob")
    third, _ = await answered(store, "ann")
    assert await store.reader.list_dialog_ids(0, 10, None) == [first, second, third]
    assert await store.reader.list_dialog_ids(1, 1, None) == [second]
    assert await store.reader.list_dialog_ids(0, 10, True) == [second, third]
    assert await store.reader.list_dialog_ids(0, 10, False) == [first]
    assert await store.reader.list_dialog_ids(3, 10, None) == []


async def test_dialogs_are_found_by_the_start_of_their_id(store: Store) -> None:
    dialog_id, _ = await answered(store, "ann")
    found = await store.reader.dialog(dialog_id)
    assert found is not None
    assert await store.reader.dialog_starts(dialog_id[:16]) == {dialog_id: found.date_start}
    assert await store.reader.dialog_starts("g") == {}


async def test_dialog_ratings_survive_turns_and_the_close(store: Store) -> None:
    dialog_id, _ = await answered(store, "ann")
    assert await store.ratings.add_dialog_rating(dialog_id, entry("good"))
    await answered(store, "ann")
    assert await store.ratings.add_dialog_rating(dialog_id, entry({"stars.count": 5}, "ann"), "ann")
    assert not await store.ratings.add_dialog_rating(dialog_id, entry(1, "eve"), "eve")
    await store.turns.close_active_dialog("ann")
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    assert dialog.attributes["ratings"] == [entry("good"), entry({"stars.count": 5}, "ann")]
    assert not await store.ratings.add_dialog_rating("f" * 32, entry(1))


async def test_utterance_ratings_are_appended_and_keep_an_earlier_value(store: Store) -> None:
    dialog_id, plain = await answered(store, "ann")
    _, kept = await answered(store, "ann", bot_attributes={"ratings": "from a skill"})
    human_utt_id = (await last_utterances(store, dialog_id, 10))[0].utt_id
    for utt_id in (plain, kept):
        assert await store.ratings.add_utterance_rating(utt_id, entry("like"))
        assert await store.ratings.add_utterance_rating(utt_id, entry(2, "ann"), "ann")
        assert not await store.ratings.add_utterance_rating(utt_id, entry(3, "eve"), "eve")
    assert not await store.ratings.add_utterance_rating(human_utt_id, entry(1))  # bot answers only
    assert not await store.ratings.add_utterance_rating("nope", entry(1))
    utterances = await last_utterances(store, dialog_id, 10)
    by_id = {u.utt_id: u.attributes.get("ratings") for u in utterances}
    assert by_id[plain] == [entry("like"), entry(2, "ann")]
    assert by_id[kept] == ["from a skill", entry("like"), entry(2, "ann")]
