"""The turn's machinery built by hand, over a temporary SQLite store and services called
in this process: :class:`MessageFlow`, :class:`UserQueues`, :class:`IdempotencyKeys`, the
arms' chooser and the dp-agent executor, each constructed directly (no app, no socket), and
what a user of the agent would notice of each."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest

from agent.connectors.http import make_transport
from agent.flow import Incoming, MessageFlow
from agent.idempotency import IdempotencyKeys, fingerprint
from agent.kinds import load_any_pipeline
from agent.queues import TurnRunning, UserQueues
from agent.state.models import BotUtterance, HumanUtterance
from agent.state.storage_limits import StorageLimits
from agent.store import open_store
from agent.store.base import Place, QueueStore, Store
from agent.turn.arms import Arm, ArmChooser, Experiment
from agent.turn.base import LoadedPipeline, TurnExecutor
from tests.turn.services import CALLS

SERVICES = "tests.turn.services"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(f"sqlite:///{tmp_path / 'chorus.db'}")
    yield opened
    await opened.close()


@pytest.fixture
async def closing() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


def chorus(*skills: str, annotators: tuple[str, ...] = ()) -> dict[str, Any]:
    """A Chorus pipeline of this module's services, the most confident answer chosen."""
    services: dict[str, Any] = {
        "skills": {name: {"connector": {"module": f"{SERVICES}:{name}"}} for name in skills},
        "response_selectors": {"pick": {"connector": {"builtin": "highest_confidence"}}},
    }
    if annotators:
        services["annotators"] = {
            name: {"connector": {"module": f"{SERVICES}:{name}"}} for name in annotators
        }
    return {"services": services}


def loaded(tmp_path: Path, name: str, document: dict[str, Any]) -> LoadedPipeline:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return load_any_pipeline(path)


async def executor_of(pipeline: LoadedPipeline, closing: AsyncExitStack) -> TurnExecutor:
    transport = make_transport()  # never used: every service runs in this process
    closing.push_async_callback(transport.aclose)
    return await pipeline.executor(
        transport, closing, channel_type="http_client", limits=StorageLimits()
    )


async def flow_of(store: Store, executor: TurnExecutor, closing: AsyncExitStack) -> MessageFlow:
    queues, keys = UserQueues(store.queues), IdempotencyKeys(store.keys)
    closing.push_async_callback(queues.aclose)
    closing.push_async_callback(keys.aclose)
    return MessageFlow(
        store.turns, executor, "http_client", ratings=store.ratings, queues=queues, keys=keys
    )


def keyed(user_id: str, text: str, key: str) -> Incoming:
    body = {"user_id": user_id, "payload": text}
    return Incoming(user_id, text, key=f"chat:{key}", fingerprint=fingerprint(body))


async def texts(store: Store, dialog_id: str | None) -> list[str]:
    assert dialog_id is not None
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    return [u.text for u in dialog.utterances]


async def test_a_turn_is_stored_once_and_a_repeated_key_is_answered_from_store(
    tmp_path: Path, store: Store, closing: AsyncExitStack
) -> None:
    executor = await executor_of(loaded(tmp_path, "p", chorus("echo")), closing)
    flow = await flow_of(store, executor, closing)
    calls = CALLS["echo"]
    first = await flow.reply(keyed("ann", "hello", "m-1"))
    again = await flow.reply(keyed("ann", "hello", "m-1"))
    assert first.result is not None and again.result is not None
    assert first.result.bot_utterance.text == "echo: hello (after -)"
    assert again.result.bot_utterance.text == first.result.bot_utterance.text
    assert again.result.bot_utterance.utt_id == first.result.bot_utterance.utt_id
    assert CALLS["echo"] == calls + 1  # the repeat ran nothing
    assert await texts(store, first.dialog_id) == ["hello", "echo: hello (after -)"]


async def test_the_same_key_with_another_request_is_refused(
    tmp_path: Path, store: Store, closing: AsyncExitStack
) -> None:
    keys = IdempotencyKeys(store.keys)
    closing.push_async_callback(keys.aclose)
    claim = await keys.claim("ann", "chat:m-1", "request one")
    async with keys.held(claim):
        await keys.complete(claim, {"dialog_id": "d", "utt_id": "u"})
    repeat = await keys.claim("ann", "chat:m-1", "request one")
    assert repeat.answered == {"dialog_id": "d", "utt_id": "u"}
    with pytest.raises(Exception, match="m-1"):
        await keys.claim("ann", "chat:m-1", "another request")


async def test_a_failing_service_costs_only_its_output(
    tmp_path: Path, store: Store, closing: AsyncExitStack
) -> None:
    pipeline = loaded(tmp_path, "p", chorus("echo", annotators=("broken",)))
    flow = await flow_of(store, await executor_of(pipeline, closing), closing)
    result, dialog_id = await flow.run_turn(Incoming("bob", "hi there"))
    assert result.bot_utterance.text == "echo: hi there (after -)"
    assert [e.service for e in result.utterance.errors] == ["broken"]
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    human = dialog.utterances[0]
    assert isinstance(human, HumanUtterance)
    assert [e.service for e in human.errors] == ["broken"]
    assert "broken" not in human.annotations


async def test_a_users_turns_run_in_order_each_seeing_the_one_before(
    tmp_path: Path, store: Store, closing: AsyncExitStack
) -> None:
    flow = await flow_of(
        store, await executor_of(loaded(tmp_path, "p", chorus("echo")), closing), closing
    )
    answers = await asyncio.gather(*(flow.run_turn(Incoming("cy", f"m{i}")) for i in range(4)))
    dialog_id = answers[0][1]
    assert {d for _, d in answers} == {dialog_id}
    stored = await texts(store, dialog_id)
    # Each answer was stored before the next message was: the utterances alternate, and
    # each turn's skill saw the answer before it.
    assert sorted(stored[::2]) == ["m0", "m1", "m2", "m3"]
    previous = ["-", *stored[1::2][:-1]]
    assert stored[1::2] == [
        f"echo: {m} (after {p})" for m, p in zip(stored[::2], previous, strict=True)
    ]


class Watched:
    """The store's queues, telling when a message takes a place behind another (what a queue
    waits on); every operation is the store's own."""

    def __init__(self, store: QueueStore) -> None:
        self.store = store
        self.queued = asyncio.Event()

    async def take_place(self, user_id: str, lease_until: datetime) -> Place:
        place = await self.store.take_place(user_id, lease_until)
        if not place.first:
            self.queued.set()
        return place

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_the_queue_serves_a_users_messages_in_order_and_a_rejecting_one_is_refused(
    store: Store, closing: AsyncExitStack
) -> None:
    watched = Watched(store.queues)
    queues = UserQueues(cast(QueueStore, watched))
    closing.push_async_callback(queues.aclose)
    log: list[str] = []
    first_in, release = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with queues.turn("dee") as place:
            await queues.note(place, "utt-1")
            log.append("first in")
            first_in.set()
            await release.wait()
            log.append("first out")

    async def second() -> None:
        async with queues.turn("dee"):
            log.append("second in")

    running = asyncio.create_task(first())
    await first_in.wait()
    with pytest.raises(TurnRunning):
        async with queues.turn("dee", "reject"):
            log.append("rejected in")
    waiting = asyncio.create_task(second())
    await watched.queued.wait()
    assert log == ["first in"]  # the second waits behind the first
    release.set()
    await asyncio.gather(running, waiting)
    assert log == ["first in", "first out", "second in"]


async def split(
    tmp_path: Path, name: str, arms: dict[str, dict[str, Any]], closing: AsyncExitStack
) -> tuple[Experiment, ArmChooser]:
    """An experiment of these pipelines, one arm each, weighed alike, and its executor."""
    pipelines = {arm: loaded(tmp_path, arm, document) for arm, document in arms.items()}
    experiment = Experiment(
        name,
        tuple(Arm(arm, 1, tmp_path / f"{arm}.json", p) for arm, p in pipelines.items()),
        tmp_path / "experiment.json",
    )
    executors = {arm: await executor_of(p, closing) for arm, p in pipelines.items()}
    return experiment, ArmChooser(experiment, executors)


async def test_arms_split_users_and_keep_each_dialog_on_its_arm(
    tmp_path: Path, store: Store, closing: AsyncExitStack
) -> None:
    experiment, chooser = await split(
        tmp_path, "split", {"a": chorus("echo"), "b": chorus("shout")}, closing
    )
    flow = await flow_of(store, chooser, closing)
    users = [f"user-{n}" for n in range(12)]
    for user in users:
        first, dialog_id = await flow.run_turn(Incoming(user, "hey"))
        second, again = await flow.run_turn(Incoming(user, "you"))
        dialog = await store.reader.dialog(dialog_id)
        assert dialog is not None and again == dialog_id
        arm = experiment.arm_for(user)
        assert dialog.arm == arm
        expected = (
            ["echo: hey (after -)", "echo: you (after echo: hey (after -))"]
            if arm == "a"
            else ["HEY", "YOU"]
        )
        assert [first.bot_utterance.text, second.bot_utterance.text] == expected
    assert {experiment.arm_for(user) for user in users} == {"a", "b"}


async def test_an_experiment_with_a_dp_agent_arm_shows_its_formatters_past_turns_whole(
    tmp_path: Path, store: Store, closing: AsyncExitStack
) -> None:
    """A Chorus arm's turns read their window as shown; a dp-agent arm's formatters still see
    each past utterance as stored, hypotheses and all."""
    recalling = dream(failing=False)
    skill = recalling["services"]["skills"]["echo"]
    skill["dialog_formatter"] = "tests.dream.formatters:previous_hypotheses"
    experiment, chooser = await split(
        tmp_path, "recall", {"a": chorus("echo"), "b": recalling}, closing
    )
    flow = await flow_of(store, chooser, closing)
    user = next(f"user-{n}" for n in range(100) if experiment.arm_for(f"user-{n}") == "b")
    first, _ = await flow.run_turn(Incoming(user, "hey"))
    second, _ = await flow.run_turn(Incoming(user, "again"))
    assert first.bot_utterance.text == "echo: -"
    assert second.bot_utterance.text == "echo: echo: -"  # the first turn's hypothesis


def dream(*, failing: bool) -> dict[str, Any]:
    """A dp-agent pipeline of python senders: an annotator (down, or absent), a skill
    saying the text back, dp-agent's built-in confidence selector."""
    services: dict[str, Any] = {
        "skills": {
            "echo": {
                "connector": {"protocol": "python", "class_name": f"{SERVICES}:Echo"},
                "dialog_formatter": "tests.dream.formatters:last_utt",
                "previous_services": ["annotators"] if failing else [],
                "state_manager_method": "add_hypothesis",
            }
        },
        "response_selectors": {
            "pick": {
                "connector": {
                    "protocol": "python",
                    "class_name": "ConfidenceResponseSelectorConnector",
                },
                "previous_services": ["skills"],
                "state_manager_method": "add_bot_utterance",
            }
        },
    }
    if failing:
        services["annotators"] = {
            "down": {
                "connector": {"protocol": "python", "class_name": f"{SERVICES}:Failing"},
                "dialog_formatter": "tests.dream.formatters:last_utt",
                "state_manager_method": "add_annotation",
            }
        }
    return {"services": services}


async def test_the_dp_agent_executor_answers_and_a_failing_service_costs_only_its_output(
    tmp_path: Path, store: Store, closing: AsyncExitStack
) -> None:
    executor = await executor_of(loaded(tmp_path, "dream", dream(failing=True)), closing)
    flow = await flow_of(store, executor, closing)
    calls = CALLS["dream-failing"]
    result, dialog_id = await flow.run_turn(Incoming("eve", "anyone home"))
    assert result.bot_utterance.text == "echo: anyone home"
    assert result.bot_utterance.active_skill == "echo"
    assert [e.service for e in result.utterance.errors] == ["annotators.down"]
    assert CALLS["dream-failing"] == calls + 1
    dialog = await store.reader.dialog(dialog_id)
    assert dialog is not None
    bot = dialog.utterances[-1]
    assert isinstance(bot, BotUtterance) and bot.text == "echo: anyone home"
    assert "annotators.down" not in dialog.utterances[0].annotations
