"""One contract, every store: what the agent relies on, run on SQLite and on MongoDB.

Each test drives the store the way ``agent/flow.py`` does and asserts what a later
read gives back; nothing here knows how a store keeps its records.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from agent.state.models import BotUtterance, Human, HumanUtterance, Hypothesis
from agent.store import Store
from agent.store.base import Claim, ClaimStatus, TurnEnd
from tests.store.reads import last_utterances, opened

INJECTION = '{"$ne": null}'


async def turn(
    store: Store,
    user: str,
    text: str,
    answer: str = "ok",
    *,
    human_attributes: dict[str, Any] | None = None,
    bot_attributes: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
) -> tuple[str, BotUtterance]:
    """A whole turn as the agent makes it: human, dialog, stored utterance, finished turn."""
    start = await opened(store, user, "http_client")
    human, dialog = start.human, start.dialog
    utterance = HumanUtterance(text=text, user=human.model_dump(mode="json"))
    await store.turns.add_utterance(dialog.dialog_id, utterance)
    utterance.annotations = annotations or {"tokens": text.split()}
    utterance.hypotheses = [
        Hypothesis(
            skill_name="echo",
            text=answer,
            confidence=0.5,
            annotations={"toxic": False},
            mood="calm",
        )
    ]
    bot = BotUtterance(text=answer, orig_text=answer, active_skill="echo", confidence=0.5)
    await store.turns.finish_turn(
        TurnEnd(
            dialog.dialog_id, human.id, utterance, bot, human_attributes or {}, bot_attributes or {}
        )
    )
    return dialog.dialog_id, bot


# -- users and dialogs ----------------------------------------------------------------


async def test_a_user_is_created_once_per_user_id(store: Store) -> None:
    first = (await opened(store, "alice")).human
    assert first.user_external_id == "alice"
    assert (await opened(store, "alice")).human.id == first.id
    assert (await opened(store, "bob")).human.id != first.id


async def test_racing_first_contacts_create_one_user(store: Store) -> None:
    starts = await asyncio.gather(*(opened(store, "newcomer") for _ in range(8)))
    assert len({s.human.id for s in starts}) == 1


async def test_a_dialog_is_created_and_loaded(store: Store) -> None:
    start = await opened(store, "alice", "telegram")
    human, head = start.human, start.dialog
    assert head.human_id == human.id and head.channel_type == "telegram"
    assert head.date_finish is None and head.bot.attributes == {}
    dialog = await store.reader.dialog(head.dialog_id)
    assert dialog is not None
    assert (dialog.dialog_id, dialog.channel_type, dialog.human.id) == (
        head.dialog_id,
        "telegram",
        human.id,
    )
    assert dialog.bot.id == head.bot.id and dialog.utterances == []
    assert await store.reader.dialog("no-such-dialog") is None


async def test_the_open_dialog_is_reused_until_closed(store: Store) -> None:
    start = await opened(store, "alice", "http_client")
    human, one = start.human, start.dialog
    assert (
        await opened(store, human.user_external_id, "http_client")
    ).dialog.dialog_id == one.dialog_id
    assert await store.turns.close_active_dialog("alice") == one.dialog_id
    assert await store.turns.close_active_dialog("alice") is None
    two = (await opened(store, human.user_external_id, "http_client")).dialog
    assert two.dialog_id != one.dialog_id
    closed = await store.reader.dialog(one.dialog_id)
    assert closed is not None and closed.date_finish is not None
    assert await store.turns.close_active_dialog("nobody") is None


async def test_open_turn_is_the_user_the_open_dialog_and_its_window(store: Store) -> None:
    start = await store.turns.open_turn("alice", "telegram", 3)
    human, dialog, history = start.human, start.dialog, start.history
    assert human.user_external_id == "alice" and history == []
    assert dialog.human_id == human.id and dialog.channel_type == "telegram"
    for i in range(3):
        await turn(store, "alice", f"message {i}", f"answer {i}")
    again = await store.turns.open_turn("alice", "telegram", 3)
    assert again.human.id == human.id and again.dialog.dialog_id == dialog.dialog_id
    assert [u.text for u in again.history] == [
        u.text for u in await last_utterances(store, dialog.dialog_id, 3)
    ]
    assert [u.text for u in again.history] == ["answer 1", "message 2", "answer 2"]
    await store.turns.close_active_dialog("alice")
    reopening = await store.turns.open_turn("alice", "telegram", 3)
    reopened, fresh = reopening.dialog, reopening.history
    assert reopened.dialog_id != dialog.dialog_id and fresh == []


async def test_racing_turns_open_one_dialog(store: Store) -> None:
    starts = await asyncio.gather(*(opened(store, "racer", "x") for _ in range(8)))
    assert len({s.dialog.dialog_id for s in starts}) == 1
    dialogs = await store.reader.user_dialogs("racer")
    assert dialogs is not None and len(dialogs) == 1


async def test_racing_closes_close_the_dialog_once(store: Store) -> None:
    dialog_id, _ = await turn(store, "alice", "hi")
    closed = await asyncio.gather(*(store.turns.close_active_dialog("alice") for _ in range(5)))
    assert closed.count(dialog_id) == 1 and closed.count(None) == 4


async def test_user_dialogs_oldest_first_and_none_for_unknown_users(store: Store) -> None:
    assert await store.reader.user_dialogs("nobody") is None
    first, _ = await turn(store, "alice", "one")
    await store.turns.close_active_dialog("alice")
    second, _ = await turn(store, "alice", "two")
    await turn(store, "bob", "not alice's")
    dialogs = await store.reader.user_dialogs("alice")
    assert dialogs is not None
    assert [d.dialog_id for d in dialogs] == [first, second]
    assert [[u.text for u in d.utterances] for d in dialogs] == [["one", "ok"], ["two", "ok"]]
    assert all(d.human.user_external_id == "alice" for d in dialogs)
    assert await store.restore.restore_user(Human(user_external_id="carol"))
    assert await store.reader.user_dialogs("carol") == []


async def test_dialogs_are_read_a_group_at_once_in_the_order_asked(store: Store) -> None:
    first, _ = await turn(store, "alice", "one")
    await store.turns.close_active_dialog("alice")
    second, _ = await turn(store, "alice", "two")
    other, _ = await turn(store, "bob", "not alice's")
    read = await store.reader.dialogs([other, "no-such-dialog", first, second, first])
    assert [d.dialog_id for d in read] == [other, first, second]
    assert [[u.text for u in d.utterances] for d in read] == [
        ["not alice's", "ok"],
        ["one", "ok"],
        ["two", "ok"],
    ]
    assert [d.human.user_external_id for d in read] == ["bob", "alice", "alice"]
    assert read[1] == await store.reader.dialog(first)
    assert await store.reader.dialogs([]) == []


# -- utterances -----------------------------------------------------------------------


async def test_the_human_utterance_is_stored_before_the_turn_finishes(store: Store) -> None:
    dialog = (await opened(store, "alice", "x")).dialog
    pending = HumanUtterance(text="pending")
    await store.turns.add_utterance(dialog.dialog_id, pending)
    (stored,) = await last_utterances(store, dialog.dialog_id, 5)
    assert stored == pending


async def test_utterances_are_appended_in_order(store: Store) -> None:
    for i in range(4):
        dialog_id, _ = await turn(store, "alice", f"message {i}", f"answer {i}")
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    assert [(u.speaker, u.text) for u in dialog.utterances] == [
        (speaker, f"{kind} {i}")
        for i in range(4)
        for speaker, kind in (("human", "message"), ("bot", "answer"))
    ]
    window = await last_utterances(store, dialog_id, 100)
    assert [u.utt_id for u in window] == [u.utt_id for u in dialog.utterances]
    assert await last_utterances(store, dialog_id, 0) == []


async def test_concurrent_messages_in_one_dialog_are_all_kept(store: Store) -> None:
    dialog = (await opened(store, "alice", "x")).dialog
    sent = [HumanUtterance(text=f"m{i}") for i in range(12)]
    await asyncio.gather(*(store.turns.add_utterance(dialog.dialog_id, u) for u in sent))
    stored = await last_utterances(store, dialog.dialog_id, 100)
    assert sorted(u.text for u in stored) == sorted(u.text for u in sent)


async def test_finish_turn_stores_annotations_hypotheses_and_the_answer(store: Store) -> None:
    dialog_id, bot = await turn(
        store,
        "alice",
        "hello there",
        "hi!",
        annotations={"ner": [{"text": "there", "type": "LOC"}]},
    )
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    human, answer = dialog.utterances
    assert isinstance(human, HumanUtterance) and isinstance(answer, BotUtterance)
    assert human.annotations == {"ner": [{"text": "there", "type": "LOC"}]}
    (hypothesis,) = human.hypotheses
    assert (hypothesis.skill_name, hypothesis.text) == ("echo", "hi!")
    assert hypothesis.annotations == {"toxic": False}
    assert hypothesis.model_extra == {"mood": "calm"}
    assert human.user["user_external_id"] == "alice"
    assert answer == bot
    assert [u.utt_id for u in await last_utterances(store, dialog_id, 2)] == [
        human.utt_id,
        bot.utt_id,
    ]


async def test_free_form_keys_round_trip_unchanged(store: Store) -> None:
    """Services choose their annotation keys: dots, dollars and percent signs included."""
    odd = {"v1.2": {"$score": 1, "100%": "a.b", "%2E": [{"x.y": None}]}, "$": {}}
    dialog_id, _ = await turn(
        store, "alice", "hi", annotations=odd, human_attributes={"50%": 1, "$price": 2, "a%2E": 3}
    )
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    assert dialog.utterances[0].annotations == odd
    assert dialog.human.attributes == {"50%": 1, "$price": 2, "a%2E": 3}


async def test_a_long_dialog_still_reads_only_the_window(store: Store) -> None:
    """220 utterances: past the 200 up to which MongoDB reads a dialog by its utterances'
    ids (agent/store/mongo/dialogs.py), so the long dialog's other read is the one tested."""
    turns = 110
    for i in range(turns):
        dialog_id, _ = await turn(store, "talker", f"message {i}", f"answer {i}")
    window = await last_utterances(store, dialog_id, 3)
    last = turns - 1
    assert [u.text for u in window] == [f"answer {last - 1}", f"message {last}", f"answer {last}"]
    assert [u.speaker for u in window] == ["bot", "human", "bot"]
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None and len(dialog.utterances) == 2 * turns
    assert [u.text for u in dialog.utterances[-3:]] == [u.text for u in window]


# -- attributes -----------------------------------------------------------------------


async def test_human_attributes_merge_and_outlive_the_dialog(store: Store) -> None:
    await turn(store, "alice", "a", human_attributes={"name": "Ann", "stage": 1})
    dialog_id, _ = await turn(store, "alice", "b", human_attributes={"stage": 2})
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None and dialog.human.attributes == {"name": "Ann", "stage": 2}
    await store.turns.close_active_dialog("alice")
    next_dialog, _ = await turn(store, "alice", "c", human_attributes={"mood": {"x": [1]}})
    assert next_dialog != dialog_id
    assert (await opened(store, "alice")).human.attributes == {
        "name": "Ann",
        "stage": 2,
        "mood": {"x": [1]},
    }


async def test_an_attribute_set_to_other_keys_with_the_same_values_is_stored(
    store: Store,
) -> None:
    """{"a": 1} then {"b": 1}: the same values in the same order under other keys is a
    change (a server that compares only values keeps the old one and says so nowhere)."""
    await turn(store, "alice", "a", human_attributes={"slot": {"a": 1}, "list": {"x": []}})
    await turn(store, "alice", "b", bot_attributes={"topic": {"cats": "yes"}})
    dialog_id, _ = await turn(
        store,
        "alice",
        "c",
        human_attributes={"slot": {"b": 1}, "list": {"y": []}},
        bot_attributes={"topic": {"dogs": "yes"}},
    )
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    assert dialog.human.attributes == {"slot": {"b": 1}, "list": {"y": []}}
    assert dialog.bot.attributes == {"topic": {"dogs": "yes"}}


async def test_a_turn_whose_dialog_was_closed_meanwhile_keeps_the_users_attributes(
    store: Store,
) -> None:
    start = await opened(store, "alice", "http_client")
    human, dialog = start.human, start.dialog
    utterance = HumanUtterance(text="bye", user=human.model_dump(mode="json"))
    await store.turns.add_utterance(dialog.dialog_id, utterance)
    await store.turns.close_active_dialog("alice")  # by another message, say
    answer = BotUtterance(text="ok", active_skill="echo", confidence=0.5)
    await store.turns.finish_turn(
        TurnEnd(dialog.dialog_id, human.id, utterance, answer, {"name": "Ann"}, {"topic": "cats"})
    )
    assert (await opened(store, "alice")).human.attributes == {"name": "Ann"}
    closed = await store.reader.dialog(dialog.dialog_id)
    assert closed is not None and [u.text for u in closed.utterances] == ["bye", "ok"]
    fresh = (await opened(store, human.user_external_id, "http_client")).dialog
    assert fresh.dialog_id != dialog.dialog_id and fresh.bot.attributes == {}


async def test_bot_attributes_merge_within_their_dialog(store: Store) -> None:
    await turn(store, "alice", "a", bot_attributes={"topic": "cats", "depth": 1})
    dialog_id, _ = await turn(store, "alice", "b", bot_attributes={"depth": 2})
    start = await opened(store, "alice", "x")
    human, head = start.human, start.dialog
    assert head.dialog_id == dialog_id and head.bot.attributes == {"topic": "cats", "depth": 2}
    await store.turns.close_active_dialog("alice")
    fresh = (await opened(store, human.user_external_id, "x")).dialog
    assert fresh.bot.attributes == {}


async def test_keys_json_escapes_replace_their_values_like_any_other(store: Store) -> None:
    """A backslash, a tab, a control character, non-ASCII text: each key is replaced whole
    by its next value (an object is not merged into the old one, a null inside is kept),
    in the user's attributes and profile and the bot's attributes, after a replacement of
    all the user's attributes too."""
    keys = ["k\\", "tab\there", "\x01", "é", "plain"]
    start = await opened(store, "alice", "http_client")
    human, dialog = start.human, start.dialog
    for n, replace in ((1, True), (2, False), (3, False)):
        utterance = HumanUtterance(text=f"t{n}")
        await store.turns.add_utterance(dialog.dialog_id, utterance)
        values = {key: {f"v{n}": [n, None]} for key in keys}
        await store.turns.finish_turn(
            TurnEnd(
                dialog.dialog_id,
                human.id,
                utterance,
                BotUtterance(text="ok", active_skill="echo", confidence=0.5),
                values,
                values,
                human_profile=values,
                replace_human_attributes=replace,
            )
        )
    expected = {key: {"v3": [3, None]} for key in keys}
    read = await store.reader.dialog(dialog.dialog_id)
    assert read is not None
    assert read.human.attributes == expected and read.bot.attributes == expected
    assert read.human.profile.model_extra == expected


async def test_concurrent_merges_of_different_keys_are_all_kept(store: Store) -> None:
    await opened(store, "alice")
    await asyncio.gather(
        *(
            turn(
                store, "alice", f"t{i}", human_attributes={f"h{i}": i}, bot_attributes={f"b{i}": i}
            )
            for i in range(8)
        )
    )
    human = (await opened(store, "alice")).human
    assert human.attributes == {f"h{i}": i for i in range(8)}
    head = (await opened(store, human.user_external_id, "x")).dialog
    assert head.bot.attributes == {f"b{i}": i for i in range(8)}
    assert len(await last_utterances(store, head.dialog_id, 100)) == 16


# -- ratings --------------------------------------------------------------------------


async def test_ratings_belong_to_their_user(store: Store) -> None:
    dialog_id, bot = await turn(store, "alice", "hi")
    await opened(store, "mallory")
    assert await store.ratings.add_dialog_rating(dialog_id, {"rating": 4.0}, "alice", 4.0)
    assert await store.ratings.add_utterance_rating(bot.utt_id, None, "alice", 1.0)
    assert not await store.ratings.add_dialog_rating(dialog_id, {"rating": 0.0}, "mallory", 0.0)
    assert not await store.ratings.add_utterance_rating(bot.utt_id, None, "mallory", 0.0)
    assert not await store.ratings.add_dialog_rating(dialog_id, {"rating": 0.0}, "nobody", 0.0)
    assert not await store.ratings.add_dialog_rating(
        "no-such-dialog", {"rating": 0.0}, "alice", 0.0
    )
    assert not await store.ratings.add_utterance_rating("no-such-utterance", None, "alice", 0.0)
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None and dialog.rating == 4.0
    human, answer = dialog.utterances
    assert isinstance(answer, BotUtterance) and answer.rating == 1.0
    assert not await store.ratings.add_utterance_rating(
        human.utt_id, None, "alice", 1.0
    )  # bot answers only


# -- dates and ids --------------------------------------------------------------------


async def test_dates_round_trip_as_aware_datetimes(store: Store) -> None:
    start = await opened(store, "alice", "x")
    human, head = start.human, start.dialog
    plus_two = timezone(timedelta(hours=2))
    sent = HumanUtterance(
        text="hi", date_time=datetime(2024, 2, 29, 23, 59, 58, 123000, tzinfo=plus_two)
    )
    await store.turns.add_utterance(head.dialog_id, sent)
    bot = BotUtterance(text="ok", active_skill="s", confidence=1.0)
    await store.turns.finish_turn(TurnEnd(head.dialog_id, human.id, sent, bot, {}, {}))
    await store.turns.close_active_dialog("alice")
    dialog = await store.reader.dialog(head.dialog_id)
    assert dialog is not None
    stored_human, stored_bot = dialog.utterances
    assert dialog.date_start == head.date_start
    assert stored_human.date_time == sent.date_time and stored_bot.date_time == bot.date_time
    assert dialog.date_finish is not None and dialog.date_finish >= dialog.date_start
    for moment in (
        dialog.date_start,
        dialog.date_finish,
        stored_human.date_time,
        stored_bot.date_time,
    ):
        assert moment.utcoffset() is not None
    assert abs(datetime.now(UTC) - dialog.date_finish) < timedelta(minutes=1)


async def test_ids_are_literals_never_queries(store: Store) -> None:
    dialog_id, bot = await turn(store, "alice", "hi")
    assert await store.reader.user_dialogs(INJECTION) is None
    assert await store.reader.dialog(INJECTION) is None
    assert await store.turns.close_active_dialog(INJECTION) is None
    assert not await store.ratings.add_dialog_rating(dialog_id, {"rating": 1.0}, INJECTION, 1.0)
    assert not await store.ratings.add_dialog_rating(INJECTION, {"rating": 1.0}, "alice", 1.0)
    assert not await store.ratings.add_utterance_rating(INJECTION, None, "alice", 1.0)
    # As an external id it is just a name: a user of its own, nobody else's data.
    odd = await opened(store, INJECTION)
    assert odd.human.user_external_id == INJECTION
    assert odd.human.id != (await opened(store, "alice")).human.id
    (own,) = await store.reader.user_dialogs(INJECTION) or []
    assert own.dialog_id == odd.dialog.dialog_id != dialog_id and own.utterances == []
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None and dialog.rating is None
    assert isinstance(dialog.utterances[1], BotUtterance)
    assert dialog.utterances[1].rating is None and dialog.utterances[1] == bot


async def test_erasing_a_user_leaves_nothing_behind(store: Store) -> None:
    first, _ = await turn(store, "leaver", "one")
    await store.turns.close_active_dialog("leaver")
    second, _ = await turn(store, "leaver", "two")
    kept, _ = await turn(store, "stayer", "three")
    assert await store.delete_user("leaver")
    assert await store.reader.user_dialogs("leaver") is None
    assert await store.reader.dialog(first) is None and await store.reader.dialog(second) is None
    assert not await store.delete_user("leaver")
    remaining = await store.reader.dialog(kept)
    assert remaining is not None and len(remaining.utterances) == 2
    again = (await opened(store, "leaver")).human  # a new message starts from nothing
    assert again.attributes == {}


async def claim(
    store: Store,
    user: str,
    key: str,
    request: str = "req",
    *,
    lease: float = 60,
    now: datetime | None = None,
) -> Claim:
    now = now or datetime.now(UTC)
    return await store.keys.claim_key(user, key, request, now + timedelta(seconds=lease), now)


async def test_a_message_id_is_claimed_once_and_remembers_its_answer(store: Store) -> None:
    assert await claim(store, "alice", "m1") == Claim(ClaimStatus.CLAIMED)
    assert await claim(store, "alice", "m1") == Claim(ClaimStatus.IN_FLIGHT)
    assert await claim(store, "bob", "m1") == Claim(ClaimStatus.CLAIMED)  # per user
    await store.keys.complete_key("alice", "m1", {"response": "hi", "n": [1, {"a.b": 2}]})
    assert await claim(store, "alice", "m1") == Claim(
        ClaimStatus.ANSWERED, {"response": "hi", "n": [1, {"a.b": 2}]}
    )
    await store.keys.release_key("bob", "m1")  # its turn failed: a retry may run it, as a retry
    assert await claim(store, "bob", "m1") == Claim(ClaimStatus.RECLAIMED)
    await store.keys.release_key("alice", "m1")  # an answered message keeps its answer
    assert (await claim(store, "alice", "m1")).reply == {"response": "hi", "n": [1, {"a.b": 2}]}


async def test_a_claim_whose_lease_ran_out_is_taken_over_once(store: Store) -> None:
    start = datetime.now(UTC)
    assert (await claim(store, "ann", "m", lease=5, now=start)).status is ClaimStatus.CLAIMED
    later = start + timedelta(seconds=10)  # its agent died: nobody renewed the lease
    takers = await asyncio.gather(*(claim(store, "ann", "m", now=later) for _ in range(5)))
    assert sorted(t.status.value for t in takers) == ["in_flight"] * 4 + ["reclaimed"]
    await store.keys.complete_key("ann", "m", {"response": "done"})
    assert await claim(store, "ann", "m", now=later + timedelta(hours=1)) == Claim(
        ClaimStatus.ANSWERED, {"response": "done"}
    )


async def test_a_renewed_claim_is_not_taken_over(store: Store) -> None:
    start = datetime.now(UTC)
    await claim(store, "ann", "m", lease=5, now=start)
    await store.keys.renew_keys([("ann", "m")], start + timedelta(seconds=60))
    later = start + timedelta(seconds=10)
    assert (await claim(store, "ann", "m", now=later)).status is ClaimStatus.IN_FLIGHT


async def test_a_claim_past_its_expiry_counts_as_absent_unless_its_turn_runs(
    store: Store,
) -> None:
    """Expiry is decided on reading, whatever the database deletes: an answered key read
    after it is claimed anew (another request may then use it), once among concurrent
    retries; a claim whose turn still holds a live lease keeps it, expiry or not."""
    start = datetime.now(UTC)
    keep = start + timedelta(seconds=60)

    async def claim_kept(key: str, request: str, now: datetime, lease: float = 10) -> Claim:
        lease_until = now + timedelta(seconds=lease)
        return await store.keys.claim_key("ann", key, request, lease_until, now, keep_until=keep)

    assert (await claim_kept("m", "first", start)).status is ClaimStatus.CLAIMED
    await store.keys.complete_key("ann", "m", {"response": "hi"})
    assert (await claim_kept("m", "first", keep - timedelta(seconds=1))).reply == {"response": "hi"}
    after = keep + timedelta(seconds=1)
    retries = await asyncio.gather(*(claim_kept("m", "other", after) for _ in range(4)))
    assert sorted(r.status.value for r in retries) == ["claimed"] + ["in_flight"] * 3

    assert (await claim_kept("busy", "req", start, lease=3600)).status is ClaimStatus.CLAIMED
    assert (await claim_kept("busy", "req", after)).status is ClaimStatus.IN_FLIGHT


async def test_a_message_id_reused_for_another_request_is_told_apart(store: Store) -> None:
    await claim(store, "ann", "m", "first request")
    assert (await claim(store, "ann", "m", "other request")).status is (ClaimStatus.OTHER_MESSAGE)
    await store.keys.complete_key("ann", "m", {"response": "to the first"})
    assert (await claim(store, "ann", "m", "other request")).status is (ClaimStatus.OTHER_MESSAGE)
    assert (await claim(store, "ann", "m", "first request")).reply == {"response": "to the first"}


async def test_an_answer_whose_number_another_agent_took_is_kept_after_it(
    store: Store, another_agent_store: Store
) -> None:
    """A writer outside the user's queue (another agent, a tool) may store an utterance at
    the number this turn's answer was to take: both are kept, the answer after it."""
    start = await opened(store, "alice", "http_client")
    human, dialog = start.human, start.dialog
    utterance = HumanUtterance(text="hello", user=human.model_dump(mode="json"))
    await store.turns.add_utterance(dialog.dialog_id, utterance)
    outside = HumanUtterance(text="from elsewhere")
    await another_agent_store.turns.add_utterance(dialog.dialog_id, outside)
    utterance.annotations = {"tokens": ["hello"]}
    bot = BotUtterance(text="hi!", orig_text="hi!", active_skill="echo", confidence=0.5)
    await store.turns.finish_turn(
        TurnEnd(dialog.dialog_id, human.id, utterance, bot, {"seen": True}, {})
    )

    stored = await store.reader.dialog(dialog.dialog_id)
    assert stored is not None
    assert [(u.speaker, u.text) for u in stored.utterances] == [
        ("human", "hello"),
        ("human", "from elsewhere"),
        ("bot", "hi!"),
    ]
    assert stored.utterances[0].annotations == {"tokens": ["hello"]}
    assert stored.utterances[-1].utt_id == bot.utt_id
    assert stored.human.attributes == {"seen": True}
    # The next turn sees all three in its window.
    window = await last_utterances(store, dialog.dialog_id, 10)
    assert [u.text for u in window] == ["hello", "from elsewhere", "hi!"]


# -- what an unfinished attempt left ----------------------------------------------------


async def test_a_turns_end_written_again_is_stored_once(store: Store) -> None:
    """The flow writes a turn's end again when the database went away in the middle of it:
    whatever of it had landed, the answer is stored once and the attributes once."""
    start = await store.turns.open_turn("ann", "http_client", 2)
    utterance = HumanUtterance(text="hi", user=start.human.model_dump(mode="json"))
    await store.turns.add_utterance(start.dialog.dialog_id, utterance)
    bot = BotUtterance(text="hello", active_skill="echo", confidence=1)
    for retrying in (False, True, True):
        await store.turns.finish_turn(
            TurnEnd(start.dialog.dialog_id, start.human.id, utterance, bot, {"n": 1}, {}),
            retrying=retrying,
        )
    after = await store.turns.open_turn("ann", "http_client", 5)
    assert [u.text for u in after.history] == ["hi", "hello"]
    assert after.human.attributes == {"n": 1} and not after.completed_last_turn


async def test_a_keyed_utterance_is_found_with_what_came_after_it(store: Store) -> None:
    start = await store.turns.open_turn("ann", "http_client", 2)
    dialog_id = start.dialog.dialog_id
    unanswered = HumanUtterance(text="first", message_key="chat:k-1")
    await store.turns.add_utterance(dialog_id, unanswered)
    assert [u.text for u in await store.turns.keyed_turn(dialog_id, "chat:k-1")] == ["first"]
    later = HumanUtterance(text="second", message_key="chat:k-2")
    await store.turns.add_utterance(dialog_id, later)
    bot = BotUtterance(text="answer", active_skill="echo", confidence=1)
    await store.turns.finish_turn(TurnEnd(dialog_id, start.human.id, later, bot, {}, {}))
    assert [u.text for u in await store.turns.keyed_turn(dialog_id, "chat:k-1")] == [
        "first",
        "second",
    ]
    assert [u.text for u in await store.turns.keyed_turn(dialog_id, "chat:k-2")] == [
        "second",
        "answer",
    ]
    assert await store.turns.keyed_turn(dialog_id, "chat:k-3") == []
    assert await store.turns.keyed_turn(dialog_id, INJECTION) == []
