"""The two writes dp-agent pipelines add to a finished turn, on every store: profile fields
merged into the user's profile, and the user's attributes replaced whole (the reset of a
dialog's first turn)."""

from __future__ import annotations

from agent.state.models import BotUtterance, HumanUtterance
from agent.store import Store
from agent.store.base import TurnEnd
from tests.store.reads import opened


async def finish(
    store: Store,
    user: str,
    attributes: dict[str, object],
    *,
    profile: dict[str, object] | None = None,
    replace: bool = False,
) -> None:
    start = await opened(store, user, "http_client")
    human, dialog = start.human, start.dialog
    utterance = HumanUtterance(text="hi")
    await store.turns.add_utterance(dialog.dialog_id, utterance)
    bot = BotUtterance(text="ok", active_skill="echo", confidence=1.0)
    await store.turns.finish_turn(
        TurnEnd(
            dialog.dialog_id,
            human.id,
            utterance,
            bot,
            attributes,
            {},
            human_profile=profile,
            replace_human_attributes=replace,
        )
    )


async def test_profile_fields_merge_into_the_profile(store: Store) -> None:
    await finish(store, "alice", {"mood": "good"}, profile={"name": "Alice"})
    await finish(store, "alice", {}, profile={"location": "Paris", "occupation": "pilot"})
    human = (await opened(store, "alice")).human
    assert human.profile.name == "Alice"
    assert human.profile.location == "Paris"
    assert human.profile.model_extra == {"occupation": "pilot"}
    assert human.attributes == {"mood": "good"}


async def test_replacing_attributes_drops_the_keys_not_given(store: Store) -> None:
    await finish(store, "bob", {"dff_state": {"turn": 3}, "disliked_skills": ["news"]})
    await finish(store, "bob", {"disliked_skills": ["news"], "fresh": 1}, replace=True)
    human = (await opened(store, "bob")).human
    assert human.attributes == {"disliked_skills": ["news"], "fresh": 1}
