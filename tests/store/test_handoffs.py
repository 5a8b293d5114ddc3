"""The store's part of handoffs (:class:`agent.store.handoffs.HandoffStore`) on SQLite,
MongoDB and MongoDB 8: every change of a handoff happens once however many agents try it
at once, and utterances appended outside a turn are in the next turn's window."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from agent.state.handoff import Handoff
from agent.state.models import BotUtterance, HumanUtterance, utc_now
from agent.store import Store
from agent.store.base import TurnEnd
from tests.store.reads import opened


def asked(dialog_id: str, user_id: str, minutes_ago: float = 0) -> Handoff:
    return Handoff(
        dialog_id=dialog_id,
        user_id=user_id,
        state="waiting",
        requested_by="api",
        requested_at=utc_now() - timedelta(minutes=minutes_ago),
    )


async def test_a_handoff_is_asked_for_once_while_it_is_active(store: Store) -> None:
    dialog_id = (await opened(store, "ann")).dialog.dialog_id
    first = await store.handoffs.request_handoff(asked(dialog_id, "ann"))
    assert first is not None and first.state == "waiting"
    assert await store.handoffs.request_handoff(asked(dialog_id, "ann")) is None
    returned = await store.handoffs.return_handoff(dialog_id, "api", utc_now())
    assert returned is not None and returned.state == "returned"
    again = await store.handoffs.request_handoff(asked(dialog_id, "ann"))
    assert again is not None and again.state == "waiting"


async def test_of_claims_at_once_on_two_agents_exactly_one_wins(
    store: Store, another_agent_store: Store
) -> None:
    for user in ("ann", "bob", "cy", "dee"):
        dialog_id = (await opened(store, user)).dialog.dialog_id
        await store.handoffs.request_handoff(asked(dialog_id, user))
        now = utc_now()
        claims = await asyncio.gather(
            store.handoffs.claim_handoff(dialog_id, "one", now),
            another_agent_store.handoffs.claim_handoff(dialog_id, "two", now),
            store.handoffs.claim_handoff(dialog_id, "three", now),
        )
        won = [claim for claim in claims if claim is not None]
        assert len(won) == 1 and won[0].state == "held"
        held = await another_agent_store.handoffs.handoff(dialog_id)
        assert held is not None and held.operator == won[0].operator


async def test_only_the_holder_returns_a_held_dialog_and_returns_happen_once(
    store: Store, another_agent_store: Store
) -> None:
    dialog_id = (await opened(store, "ann")).dialog.dialog_id
    await store.handoffs.request_handoff(asked(dialog_id, "ann"))
    await store.handoffs.claim_handoff(dialog_id, "ann-op", utc_now())
    assert (
        await store.handoffs.return_handoff(dialog_id, "operator", utc_now(), operator="bo") is None
    )
    both = await asyncio.gather(
        store.handoffs.return_handoff(dialog_id, "operator", utc_now(), operator="ann-op"),
        another_agent_store.handoffs.return_handoff(dialog_id, "api", utc_now()),
    )
    assert len([r for r in both if r is not None]) == 1


async def test_the_inbox_lists_waiting_then_held_and_unclaimed_by_age(store: Store) -> None:
    ids = {}
    for user, minutes in (("new", 1), ("old", 30), ("held", 60)):
        ids[user] = (await opened(store, user)).dialog.dialog_id
        await store.handoffs.request_handoff(asked(ids[user], user, minutes_ago=minutes))
    await store.handoffs.claim_handoff(ids["held"], "op", utc_now())
    inbox = await store.handoffs.handoffs(("waiting", "held"), limit=10)
    assert [h.dialog_id for h in inbox] == [ids["old"], ids["new"], ids["held"]]
    stale = await store.handoffs.handoffs(
        ("waiting",), limit=10, requested_before=utc_now() - timedelta(minutes=10)
    )
    assert [h.dialog_id for h in stale] == [ids["old"]]
    assert (
        await store.handoffs.return_handoff(
            ids["new"],
            "timeout",
            utc_now(),
            states=("waiting",),
            requested_before=utc_now() - timedelta(minutes=10),
        )
        is None
    )


async def test_utterances_appended_outside_a_turn_are_in_order_and_in_the_next_window(
    store: Store,
) -> None:
    start = await store.turns.open_turn("ann", "http_client", 5)
    dialog_id = start.dialog.dialog_id
    first = HumanUtterance(text="hello")
    await store.turns.add_utterance(dialog_id, first)
    answer = BotUtterance(text="hi", active_skill="s", confidence=1.0)
    await store.turns.finish_turn(TurnEnd(dialog_id, start.human.id, first, answer))
    kept = HumanUtterance(text="anyone?", handed_off=True)
    await store.handoffs.append_utterance(dialog_id, "ann", kept)
    said = BotUtterance(text="me", active_skill="operator", confidence=1.0, operator="op")
    await store.handoffs.append_utterance(dialog_id, "ann", said)

    after = await store.handoffs.utterances_after(dialog_id, answer.utt_id, limit=10)
    assert after is not None
    assert [(u.text, u.speaker) for u in after] == [("anyone?", "human"), ("me", "bot")]
    assert await store.handoffs.utterances_after(dialog_id, "no-such-id", limit=10) is None
    window = (await store.turns.open_turn("ann", "http_client", 5)).history
    assert [u.text for u in window] == ["hello", "hi", "anyone?", "me"]
    next_message = HumanUtterance(text="thanks")
    await store.turns.add_utterance(dialog_id, next_message)
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    assert [u.text for u in dialog.utterances] == ["hello", "hi", "anyone?", "me", "thanks"]
