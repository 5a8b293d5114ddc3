"""Messages of one user that arrive at once, at one agent or at two sharing a database:
all answered, in arrival order, utterances alternating, no attribute update lost."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from agent.sdk import DialogView, Service, SkillHypothesis
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
