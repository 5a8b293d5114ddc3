"""Messages of one user that arrive at once, at one agent or at two sharing a database:
all answered, in arrival order, utterances alternating, no attribute update lost."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from agent.sdk import DialogView, Service, SkillHypothesis
from agent.state.models import utc_now
from agent.store import open_store
from tests.conftest import AgentFactory, service_entry
from tests.support.servers import ServerThread
from tests.support.services import counter_skill


def pipeline(url: str, timeout: float = 5.0) -> dict[str, Any]:
    return {
        "services": {"skills": {"skill": service_entry(url, timeout=timeout)}},
        "turn_timeout": timeout + 5,
    }


def dialog_of(client: httpx.Client, user: str) -> list[dict[str, Any]]:
    (dialog,) = client.get(f"/api/user/{user}").json()
    utterances: list[dict[str, Any]] = dialog["utterances"]
    return utterances


@pytest.mark.both_stores
def test_concurrent_messages_at_two_agents_take_turns(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
) -> None:
    url = services(counter_skill("skill")).url
    replicas = [agent(pipeline(url)), agent(pipeline(url))]
    messages = 12

    def send(i: int) -> httpx.Response:
        return replicas[i % 2].post("/", json={"user_id": "ann", "payload": f"message {i}"})

    with ThreadPoolExecutor(max_workers=messages) as pool:
        answers = list(pool.map(send, range(messages)))

    assert [a.status_code for a in answers] == [200] * messages
    assert sorted(a.json()["response"] for a in answers) == sorted(
        f"count is {k}" for k in range(1, messages + 1)
    )
    utterances = dialog_of(replicas[0], "ann")
    assert len(utterances) == 2 * messages
    assert [u["speaker"] for u in utterances] == ["human", "bot"] * messages
    # each answer follows its own message, and every increment built on the previous one
    assert [u["text"] for u in utterances[1::2]] == [
        f"count is {k}" for k in range(1, messages + 1)
    ]
    human = replicas[1].get("/api/user/ann").json()[0]["human"]
    assert human["attributes"]["count"] == messages


def gated_skill(arrived: threading.Event, gate: threading.Event) -> FastAPI:
    """Answers every message, but holds the one saying "first" until the test opens the gate."""
    service = Service("skill")

    @service.skill
    def answer(dialog: DialogView) -> SkillHypothesis:  # sync: runs in a worker thread
        text = dialog.human_utterance.text
        if text == "first":
            arrived.set()
            assert gate.wait(30), "the test never opened the gate"
        return SkillHypothesis(text=f"answer to {text}", confidence=0.9)

    return service.app


def in_flight(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("chorus_turns_in_flight "):
            return float(line.split()[1])
    raise AssertionError("no chorus_turns_in_flight in /metrics")


def test_a_message_arriving_mid_turn_waits_for_the_answer_before_it(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
) -> None:
    arrived, gate = threading.Event(), threading.Event()
    url = services(gated_skill(arrived, gate)).url
    one, two = agent(pipeline(url, timeout=20)), agent(pipeline(url, timeout=20))
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(one.post, "/", json={"user_id": "ann", "payload": "first"})
        assert arrived.wait(30), "the first message never reached the skill"
        second = pool.submit(two.post, "/", json={"user_id": "ann", "payload": "second"})
        while in_flight(two) < 1:  # the second message is at the other agent, waiting
            assert not second.done(), second.result().text
        gate.set()
        assert first.result().json()["response"] == "answer to first"
        assert second.result().json()["response"] == "answer to second"
    assert [u["text"] for u in dialog_of(one, "ann")] == [
        "first",
        "answer to first",
        "second",
        "answer to second",
    ]


def lapse_lease(db_url: str, user: str, place: int) -> None:
    """What a stalled agent leaves in the store: its place's lease run out while its turn
    still runs (its heartbeat, every third of a 600 s lease, does not come in between)."""

    async def lapse() -> None:
        store = await open_store(db_url)
        try:
            await store.queues.renew_places([(user, place)], utc_now() - timedelta(seconds=1))
        finally:
            await store.close()

    asyncio.run(lapse())


@pytest.mark.both_stores
def test_a_turn_passed_over_mid_turn_is_not_stored_over_the_next_and_its_retry_is_answered(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    db_url: str,
) -> None:
    """The first message's agent stalls past its lease while its turn runs; the second
    message, at another agent, passes its place over and is answered. The first turn's
    answer then must not be stored over the second's: its client gets 503 with
    Retry-After, and the same request sent again (its idempotency key too) is answered."""
    arrived, gate = threading.Event(), threading.Event()
    url = services(gated_skill(arrived, gate)).url
    stalled = agent(pipeline(url, timeout=20), queue_lease=600.0)
    other = agent(pipeline(url, timeout=20))
    message, key = {"user_id": "ann", "payload": "first"}, {"Idempotency-Key": "k-first"}
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(stalled.post, "/", json=message, headers=key)
        assert arrived.wait(30), "the first message never reached the skill"
        lapse_lease(db_url, "ann", 0)
        second = other.post("/", json={"user_id": "ann", "payload": "second"})
        assert second.status_code == 200, second.text
        assert second.json()["response"] == "answer to second"
        gate.set()
        overtaken = first.result()
    assert overtaken.status_code == 503, overtaken.text
    assert "Retry-After" in overtaken.headers
    assert "send it again" in overtaken.json()["message"]
    utterances = dialog_of(other, "ann")
    assert [(u["text"], u.get("interrupted", False)) for u in utterances] == [
        ("first", True),
        ("second", False),
        ("answer to second", False),
    ]
    assert overtaken.json()["utt_id"] == utterances[0]["utt_id"]
    assert "chorus_turns_overtaken_total 1.0" in stalled.get("/metrics").text

    retried = stalled.post("/", json=message, headers=key)
    assert retried.status_code == 200, retried.text
    assert retried.json()["response"] == "answer to first"
    assert [u["text"] for u in dialog_of(other, "ann")][3:] == ["first", "answer to first"]
    again = stalled.post("/", json=message, headers=key)  # the key now names the answered retry
    assert again.json()["response"] == "answer to first"
    assert len(dialog_of(other, "ann")) == 5
