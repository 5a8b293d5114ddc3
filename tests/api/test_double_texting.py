"""A second message of a user while the first is being answered, at another agent replica
sharing the database: each policy (enqueue, reject, interrupt), set by the pipeline file or
by the request. The first message is held by a real skill until the test
opens its gate, so the second always arrives mid-turn; nothing waits on time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.api.test_concurrent_messages import dialog_of, gated_skill, in_flight, pipeline
from tests.support.servers import ServerThread

AgentPair = tuple[httpx.Client, httpx.Client]


def two_replicas(
    agent: Callable[..., httpx.Client],
    services: Callable[[FastAPI], ServerThread],
    arrived: threading.Event,
    gate: threading.Event,
    policy: str | None = None,
) -> AgentPair:
    config: dict[str, Any] = pipeline(services(gated_skill(arrived, gate)).url, timeout=20)
    if policy is not None:
        config["double_texting"] = policy
    return agent(config), agent(config)


def say(client: httpx.Client, text: str, policy: str | None = None) -> httpx.Response:
    params = {"double_texting": policy} if policy else None
    return client.post("/", params=params, json={"user_id": "ann", "payload": text})


def test_enqueue_answers_the_second_message_after_the_first(agent: Any, services: Any) -> None:
    arrived, gate = threading.Event(), threading.Event()
    one, two = two_replicas(agent, services, arrived, gate, "enqueue")
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(say, one, "first")
        assert arrived.wait(30), "the first message never reached the skill"
        second = pool.submit(say, two, "second")
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


def test_reject_refuses_the_second_message_naming_the_running_turn(
    agent: Any, services: Any
) -> None:
    arrived, gate = threading.Event(), threading.Event()
    one, two = two_replicas(agent, services, arrived, gate, "reject")
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(say, one, "first")
        assert arrived.wait(30), "the first message never reached the skill"
        refused = say(two, "second")
        gate.set()
        answered = first.result()
    assert answered.json()["response"] == "answer to first"
    assert refused.status_code == 409
    utterances = dialog_of(one, "ann")
    assert [u["text"] for u in utterances] == ["first", "answer to first"]
    assert refused.json()["utt_id"] == utterances[0]["utt_id"]
    assert "being answered" in refused.json()["message"]
    # Nothing is left behind: the user's next message is answered at once.
    assert say(two, "third").json()["response"] == "answer to third"


@pytest.mark.parametrize("where", ["another replica", "the same agent"])
def test_interrupt_cancels_the_running_turn_and_answers_the_new_message(
    agent: Any, services: Any, where: str
) -> None:
    arrived, gate = threading.Event(), threading.Event()
    one, two = two_replicas(agent, services, arrived, gate, "interrupt")
    interrupter = two if where == "another replica" else one
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            first = pool.submit(say, one, "first")
            assert arrived.wait(30), "the first message never reached the skill"
            second = say(interrupter, "second")  # answered while the skill holds "first"
            interrupted = first.result()
    finally:
        gate.set()
    assert second.status_code == 200, second.text
    assert second.json()["response"] == "answer to second"
    assert interrupted.status_code == 409
    utterances = dialog_of(one, "ann")
    assert [(u["text"], u.get("interrupted", False)) for u in utterances] == [
        ("first", True),
        ("second", False),
        ("answer to second", False),
    ]
    assert interrupted.json()["utt_id"] == utterances[0]["utt_id"]
    assert "interrupted" in interrupted.json()["message"]
    # The interrupted message is not taken for unanswered: the next turn goes on normally.
    assert say(one, "third").json()["response"] == "answer to third"
    assert [u["text"] for u in dialog_of(two, "ann")][-2:] == ["third", "answer to third"]


def test_the_request_overrides_the_pipelines_policy(agent: Any, services: Any) -> None:
    arrived, gate = threading.Event(), threading.Event()
    one, two = two_replicas(agent, services, arrived, gate)  # the default: enqueue
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(say, one, "first")
        assert arrived.wait(30), "the first message never reached the skill"
        refused = say(two, "second", policy="reject")
        gate.set()
        assert first.result().status_code == 200
    assert refused.status_code == 409
    unknown = say(two, "third", policy="shout")
    assert unknown.status_code == 422
    assert "double_texting" in unknown.json()["message"]
