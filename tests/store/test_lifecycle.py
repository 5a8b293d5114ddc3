"""The data lifecycle's contract, on every store: each retention rule alone, applied by the
sweep at a time the test chooses (no sleeping for days), and what it never touches."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from agent.lifecycle import Sweeper
from agent.metrics import Metrics
from agent.state.models import (
    BotUtterance,
    HumanUtterance,
    Hypothesis,
    ServiceCall,
    ServiceFailure,
    utc_now,
)
from agent.store import Store
from agent.store.base import Retention, Swept, TurnEnd
from tests.store.reads import opened
from tests.store.test_contract import turn

DAY = timedelta(days=1)


def sweeper(store: Store, at: datetime, batch: int = 100, **rules: timedelta) -> Sweeper:
    return Sweeper(
        store.lifecycle, Retention(**rules), Metrics(), interval=60, batch=batch, clock=lambda: at
    )


async def rich_turn(store: Store, user: str, text: str) -> tuple[str, BotUtterance]:
    """A turn with everything compaction removes: two hypotheses (the second one chosen),
    annotations, a trace, an error and a skill's annotations on the answer."""
    start = await opened(store, user, "http_client")
    human, dialog = start.human, start.dialog
    utterance = HumanUtterance(text=text)
    await store.turns.add_utterance(dialog.dialog_id, utterance)
    utterance.annotations = {"tokens": text.split(), "big": "x" * 1000}
    utterance.hypotheses = [
        Hypothesis(skill_name="other", text="not this", confidence=0.9),
        Hypothesis(skill_name="echo", text=text, confidence=0.5, annotations={"toxic": False}),
    ]
    utterance.trace = [
        ServiceCall(service="echo", role="skills", start=0, duration=0.1, outcome="ok")
    ]
    utterance.errors = [ServiceFailure(service="ner", kind="timeout", message="slow")]
    answer = BotUtterance(
        text=text, active_skill="echo", confidence=0.5, annotations={"sentiment": "neutral"}
    )
    await store.turns.finish_turn(
        TurnEnd(dialog.dialog_id, human.id, utterance, answer, {"name": "ann"}, {})
    )
    return dialog.dialog_id, answer


async def closed_dialog(store: Store, user: str, turns: int = 2) -> str:
    dialog_id = ""
    for i in range(turns):
        dialog_id, _ = await turn(store, user, f"hello {i}")
    assert await store.turns.close_active_dialog(user) == dialog_id
    return dialog_id


# -- closed dialogs --------------------------------------------------------------------


async def test_closed_dialogs_are_deleted_whole_once_kept_long_enough(store: Store) -> None:
    old = await closed_dialog(store, "ann")
    assert await store.ratings.add_dialog_rating(old, {"rating": 5}, "ann", 5.0)
    _, answer = await turn(store, "ann", "still talking")  # the open dialog
    await store.ratings.add_utterance_rating(answer.utt_id, None, "ann", 1.0)
    before = await store.lifecycle.sizes()

    early = await sweeper(store, utc_now() + 29 * DAY, closed_dialogs=30 * DAY).run_round()
    assert (early.dialogs_deleted, early.utterances_deleted) == (0, 0)
    assert await store.reader.dialog(old) is not None

    swept = await sweeper(store, utc_now() + 31 * DAY, closed_dialogs=30 * DAY).run_round()
    assert (swept.dialogs_deleted, swept.utterances_deleted) == (1, 4)
    assert await store.reader.dialog(old) is None
    after = await store.lifecycle.sizes()
    assert after["utterances"] == before["utterances"] - 4
    # the open dialog, its window and ratings, and the user stay
    (kept,) = await store.reader.user_dialogs("ann") or []
    assert kept.date_finish is None
    assert [u.text for u in kept.utterances] == ["still talking", "ok"]
    rated = kept.utterances[1]
    assert isinstance(rated, BotUtterance) and rated.rating == 1.0
    assert (await opened(store, "ann")).human.id == kept.human.id


async def test_a_large_closed_dialog_is_deleted_over_several_bounded_passes(
    store: Store,
) -> None:
    dialogs = [await closed_dialog(store, f"user{i}", turns=3) for i in range(3)]
    sweep = sweeper(store, utc_now() + 2 * DAY, batch=4, closed_dialogs=DAY)
    passes: list[Swept] = []
    while not passes or not passes[-1].round_done:
        passes.append(await sweep.run_pass())
    assert all(p.utterances_deleted <= 4 for p in passes)
    assert sum(p.utterances_deleted for p in passes) == 18
    assert sum(p.dialogs_deleted for p in passes) == 3
    for dialog_id in dialogs:
        assert await store.reader.dialog(dialog_id) is None
    assert (await store.lifecycle.sizes())["utterances"] == 0


# -- idle dialogs ----------------------------------------------------------------------


async def test_an_idle_open_dialog_is_closed_and_the_next_message_opens_another(
    store: Store,
) -> None:
    dialog_id, _ = await turn(store, "ann", "hello", human_attributes={"name": "Ann"})
    quiet = await sweeper(
        store, utc_now() + timedelta(minutes=50), idle_dialogs=timedelta(hours=1)
    ).run_round()
    assert quiet.dialogs_closed == 0

    swept = await sweeper(
        store, utc_now() + 2 * timedelta(hours=1), idle_dialogs=timedelta(hours=1)
    ).run_round()
    assert swept.dialogs_closed == 1
    closed = await store.reader.dialog(dialog_id)
    assert closed is not None and closed.date_finish is not None
    assert [u.text for u in closed.utterances] == ["hello", "ok"]
    assert dialog_id not in await store.reader.list_dialog_ids(0, 10, active=True)

    new_id, _ = await turn(store, "ann", "back again")
    assert new_id != dialog_id
    assert (await opened(store, "ann")).human.attributes == {"name": "Ann"}


async def test_an_open_dialog_without_utterances_is_idle_from_its_start(store: Store) -> None:
    start = await opened(store, "ann", "http_client")
    human, head = start.human, start.dialog
    swept = await sweeper(store, utc_now() + DAY, idle_dialogs=timedelta(hours=1)).run_round()
    assert swept.dialogs_closed == 1
    assert (
        await opened(store, human.user_external_id, "http_client")
    ).dialog.dialog_id != head.dialog_id


# -- compaction ------------------------------------------------------------------------


async def test_compaction_keeps_texts_the_chosen_answer_its_skill_and_ratings(
    store: Store,
) -> None:
    dialog_id, answer = await rich_turn(store, "ann", "hello there")
    assert await store.ratings.add_utterance_rating(answer.utt_id, {"rating": 4}, "ann", 4.0)

    early = await sweeper(store, utc_now() + 6 * DAY, compact_turns=7 * DAY).run_round()
    assert early.utterances_compacted == 0

    swept = await sweeper(store, utc_now() + 8 * DAY, compact_turns=7 * DAY).run_round()
    assert swept.utterances_compacted == 2
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    human, bot = dialog.utterances
    assert isinstance(human, HumanUtterance) and isinstance(bot, BotUtterance)
    assert human.text == "hello there"
    assert [(h.skill_name, h.text) for h in human.hypotheses] == [("echo", "hello there")]
    assert (human.annotations, human.trace, human.errors) == ({}, [], [])
    assert (bot.text, bot.active_skill, bot.rating, bot.annotations) == (
        "hello there",
        "echo",
        4.0,
        {},
    )
    assert bot.attributes["ratings"] == [{"rating": 4}]
    assert (await opened(store, "ann")).human.attributes == {"name": "ann"}

    again = await sweeper(store, utc_now() + 9 * DAY, compact_turns=7 * DAY).run_round()
    assert again.utterances_compacted == 0  # nothing left to compact


# -- what is never touched ---------------------------------------------------------------


async def test_a_turn_in_flight_is_neither_closed_nor_compacted(store: Store) -> None:
    await turn(store, "ann", "earlier")
    place = await store.queues.take_place("ann", utc_now() + timedelta(seconds=30))
    assert place.first
    start = await store.turns.open_turn("ann", "http_client", 4, seen=place.seen)
    utterance = HumanUtterance(text="in flight")
    await store.turns.add_utterance(start.dialog.dialog_id, utterance)

    rules: dict[str, Any] = {
        "closed_dialogs": timedelta(seconds=1),
        "idle_dialogs": timedelta(seconds=1),
        "compact_turns": timedelta(seconds=1),
    }
    swept = await sweeper(store, utc_now() + 365 * DAY, **rules).run_round()
    assert (swept.dialogs_closed, swept.dialogs_deleted) == (0, 0)

    utterance.annotations = {"tokens": ["in", "flight"]}
    answer = BotUtterance(text="done", active_skill="echo", confidence=1.0)
    await store.turns.finish_turn(
        TurnEnd(start.dialog.dialog_id, start.human.id, utterance, answer, {}, {}, leave=place)
    )
    dialog = await store.reader.dialog(start.dialog.dialog_id)
    assert dialog is not None and dialog.date_finish is None
    assert [u.text for u in dialog.utterances] == ["earlier", "ok", "in flight", "done"]
    assert dialog.utterances[2].annotations == {"tokens": ["in", "flight"]}


async def test_a_pass_over_a_large_batch_lets_turns_run_while_it_works(store: Store) -> None:
    """A turn that arrives during a pass does not wait for the whole pass (on SQLite, whose
    queries run on the event loop, the pass goes in short steps)."""
    for i in range(4):
        await closed_dialog(store, f"user{i}", turns=10)
    for i in range(4):
        await rich_turn(store, f"talker{i}", "compact me")
    sweep = sweeper(store, utc_now() + 2 * DAY, batch=1000, closed_dialogs=DAY, compact_turns=DAY)
    running = asyncio.get_running_loop().create_task(sweep.run_pass())
    turns_meanwhile = 0
    while not running.done():
        await asyncio.sleep(0)  # a turn's chance to run
        turns_meanwhile += 1
    swept = running.result()
    assert (swept.utterances_deleted, swept.utterances_compacted) == (80, 8)
    assert turns_meanwhile > 3


async def test_erasure_still_removes_everything_at_once(store: Store) -> None:
    await closed_dialog(store, "ann")
    await rich_turn(store, "ann", "hi")
    await sweeper(store, utc_now() + 8 * DAY, compact_turns=7 * DAY).run_round()
    assert await store.delete_user("ann")
    assert await store.reader.user_dialogs("ann") is None
    sizes = await store.lifecycle.sizes()
    assert (sizes["users"], sizes["dialogs"], sizes["utterances"]) == (0, 0, 0)


async def test_the_sweep_counts_what_each_rule_did_on_metrics(store: Store) -> None:
    await closed_dialog(store, "ann")
    await rich_turn(store, "bob", "hi")
    metrics = Metrics()
    sweep = Sweeper(
        store.lifecycle,
        Retention(closed_dialogs=DAY, compact_turns=DAY),
        metrics,
        interval=60,
        batch=100,
        clock=lambda: utc_now() + 2 * DAY,
    )
    await sweep.run_round()
    text = metrics.render().decode()
    assert (
        'chorus_lifecycle_records_total{record="dialogs_deleted",rule="closed_dialogs"} 1.0' in text
    )
    assert (
        'chorus_lifecycle_records_total{record="utterances_deleted",rule="closed_dialogs"} 4.0'
        in text
    )
    assert (
        'chorus_lifecycle_records_total{record="utterances_compacted",rule="compact_turns"} 2.0'
        in text
    )
    assert 'chorus_store_records{collection="utterances"} 2.0' in text
    assert 'chorus_store_records{collection="users"} 2.0' in text
