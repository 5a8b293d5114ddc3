"""A turn's window read as shown (:meth:`TurnStore.open_turn` with ``whole`` False), on every
store: all of each utterance but the fields of :data:`NOT_SHOWN`, which no service of a Chorus
pipeline is shown of a past utterance; and the same utterances read whole by their ids,
as a message answered before is sent again."""

from __future__ import annotations

from agent.state.models import (
    NOT_SHOWN,
    BotUtterance,
    HumanUtterance,
    Hypothesis,
    ServiceCall,
    ServiceFailure,
    SkillSelectorDecision,
)
from agent.store import Store
from agent.store.base import TurnEnd


async def _answered_turn(store: Store, user: str) -> tuple[HumanUtterance, BotUtterance]:
    """A turn stored with every field a read as shown leaves out filled in."""
    start = await store.turns.open_turn(user, "http_client", 0)
    utterance = HumanUtterance(
        text="why is the sky blue?",
        user=start.human.model_dump(mode="json"),
        attributes={"image": "sky.png"},
        message_key="chat:k-1",
    )
    await store.turns.add_utterance(start.dialog.dialog_id, utterance)
    utterance.annotations = {"retrieval": {"passages": ["Rayleigh scattering"] * 3}}
    utterance.hypotheses = [
        Hypothesis(skill_name="llm", text="Scattering.", confidence=0.9, usage={"total": 9})
    ]
    utterance.trace = [
        ServiceCall(service="llm", role="skills", start=0.001, duration=0.5, outcome="ok")
    ]
    utterance.errors = [ServiceFailure(service="faq", kind="timeout", message="slow")]
    utterance.skill_selection = [SkillSelectorDecision(selector="rules", skills=["llm"])]
    bot = BotUtterance(
        text="Scattering.",
        orig_text="Scattering.",
        active_skill="llm",
        confidence=0.9,
        user={"attributes": {"persona": "a long persona " * 50}},
        attributes={"selector_reason": "asked why"},
        annotations={"sentiment": "neutral"},
    )
    await store.turns.finish_turn(
        TurnEnd(start.dialog.dialog_id, start.human.id, utterance, bot, {}, {})
    )
    return utterance, bot


async def test_a_window_as_shown_holds_all_but_what_no_service_is_shown(store: Store) -> None:
    human, bot = await _answered_turn(store, "ann")
    whole = (await store.turns.open_turn("ann", "http_client", 4)).history
    shown = (await store.turns.open_turn("ann", "http_client", 4, whole=False)).history
    assert whole == [human, bot]
    left_out = set(NOT_SHOWN)
    assert [u.model_dump(exclude=left_out) for u in shown] == [
        u.model_dump(exclude=left_out) for u in whole
    ]
    shown_human, shown_bot = shown
    assert isinstance(shown_human, HumanUtterance) and isinstance(shown_bot, BotUtterance)
    assert (shown_human.user, shown_human.hypotheses, shown_human.trace) == ({}, [], [])
    assert (shown_human.errors, shown_human.skill_selection, shown_bot.user) == ([], [], {})
    # what the turn checks of its last utterances is all there
    assert shown_human.message_key == "chat:k-1" and shown_bot.orig_text == "Scattering."


async def test_utterances_are_read_whole_by_their_ids(store: Store) -> None:
    human, bot = await _answered_turn(store, "ann")
    read = await store.turns.utterances([bot.utt_id, "no-such-utterance", human.utt_id])
    assert read == [bot, human]
    assert await store.turns.utterances([]) == []
