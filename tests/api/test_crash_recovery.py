"""Processes that die mid-turn: a skill killed while the agent waits on it costs only its
own output; an agent killed by SIGKILL leaves the dialog usable after a restart."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.api.test_concurrent_messages import gated_skill
from tests.conftest import service_entry
from tests.support.processes import agent_process, uvicorn_process
from tests.support.servers import ServerThread
from tests.support.services import fixed_skill


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll an observable condition (a file, a metric) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def write_pipeline(path: Path, skills: dict[str, Any]) -> str:
    path.write_text(json.dumps({"services": {"skills": skills}, "turn_timeout": 30}))
    return str(path)


def test_a_skill_killed_mid_call_costs_only_its_own_output(
    services: Callable[[FastAPI], ServerThread],
    tmp_path: Path,
    db_url: str,
) -> None:
    marker = tmp_path / "called"
    steady = services(fixed_skill("steady", "still here", 0.5))
    with uvicorn_process(
        "tests.support.services:hanging_skill",
        factory=True,
        env={"HANGING_SKILL_MARKER": str(marker)},
    ) as (skill_url, skill):
        pipeline = write_pipeline(
            tmp_path / "pipeline.json",
            {"hanging": service_entry(skill_url, timeout=20), "steady": service_entry(steady.url)},
        )
        with agent_process({"CHORUS_PIPELINE": pipeline, "CHORUS_DB_URL": db_url}) as (base, _):
            answers: list[httpx.Response] = []
            chat = threading.Thread(
                target=lambda: answers.append(
                    httpx.post(f"{base}/", json={"user_id": "ann", "payload": "hello"}, timeout=30)
                )
            )
            chat.start()
            wait_for(marker.exists, "the agent called the hanging skill")
            skill.send_signal(signal.SIGKILL)
            chat.join(30)
            (answer,) = answers
            assert answer.status_code == 200
            assert answer.json()["response"] == "still here"
            # the next turn finds the skill gone (connection refused) and answers anyway
            again = httpx.post(f"{base}/", json={"user_id": "ann", "payload": "again"}, timeout=30)
            assert again.json()["response"] == "still here"
            (dialog,) = httpx.get(f"{base}/api/user/ann").json()
    first, second = dialog["utterances"][0], dialog["utterances"][2]
    assert [(e["service"], e["kind"]) for e in first["errors"]] == [("hanging", "unavailable")]
    assert [(e["service"], e["kind"]) for e in second["errors"]] == [("hanging", "unavailable")]
    assert [u["text"] for u in dialog["utterances"]] == [
        "hello",
        "still here",
        "again",
        "still here",
    ]


@pytest.mark.both_stores
def test_an_agent_killed_mid_turn_leaves_the_dialog_usable(
    services: Callable[[FastAPI], ServerThread],
    tmp_path: Path,
    db_url: str,
) -> None:
    arrived, gate = threading.Event(), threading.Event()
    skill = services(gated_skill(arrived, gate))
    env = {
        "CHORUS_PIPELINE": write_pipeline(
            tmp_path / "pipeline.json", {"skill": service_entry(skill.url, timeout=20)}
        ),
        "CHORUS_DB_URL": db_url,
        "CHORUS_QUEUE_LEASE": "1",
    }
    try:
        with agent_process(env) as (base, agent):
            lost: list[BaseException] = []

            def send_first() -> None:
                try:
                    httpx.post(f"{base}/", json={"user_id": "ann", "payload": "first"}, timeout=30)
                except httpx.TransportError as exc:
                    lost.append(exc)

            chat = threading.Thread(target=send_first)
            chat.start()
            assert arrived.wait(30), "the first message never reached the skill"
            agent.send_signal(signal.SIGKILL)
            agent.wait()
            chat.join(30)
            assert lost, "the client got an answer from a killed agent"
    finally:
        gate.set()  # the skill's held call ends; nobody is listening for it any more
    with agent_process(env) as (base, _):
        answer = httpx.post(f"{base}/", json={"user_id": "ann", "payload": "second"}, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["response"] == "answer to second"
        (dialog,) = httpx.get(f"{base}/api/user/ann").json()
    # the interrupted message is kept; the dialog goes on after it
    assert [u["text"] for u in dialog["utterances"]] == ["first", "second", "answer to second"]


def retried(post: Callable[[], httpx.Response], timeout: float = 30.0) -> httpx.Response:
    """Send until the dead agent's claim and place are given up (409 until their leases
    run out), as a client told "retry shortly" would."""
    deadline = time.monotonic() + timeout
    while (response := post()).status_code == 409 and "retry-after" in response.headers:
        assert time.monotonic() < deadline, "the dead agent's claim was never given up"
        time.sleep(0.1)
    return response


@pytest.fixture
def dead_agents_message(
    services: Callable[[FastAPI], ServerThread], tmp_path: Path, db_url: str
) -> dict[str, str]:
    """An agent killed by SIGKILL while the skill held "first" (key k-1) of user ann: the
    message is stored unanswered and its key claimed by the dead agent. The settings of
    the agent to start next."""
    arrived, gate = threading.Event(), threading.Event()
    skill = services(gated_skill(arrived, gate))
    env = {
        "CHORUS_PIPELINE": write_pipeline(
            tmp_path / "pipeline.json", {"skill": service_entry(skill.url, timeout=20)}
        ),
        "CHORUS_DB_URL": db_url,
        "CHORUS_QUEUE_LEASE": "1",
    }
    first = {"user_id": "ann", "payload": "first", "message_id": "k-1"}
    try:
        with agent_process(env) as (base, agent):

            def send_first() -> None:
                with contextlib.suppress(httpx.TransportError):  # the agent dies meanwhile
                    httpx.post(f"{base}/", json=first, timeout=30)

            chat = threading.Thread(target=send_first)
            chat.start()
            assert arrived.wait(30), "the message never reached the skill"
            agent.send_signal(signal.SIGKILL)
            agent.wait()
            chat.join(30)
    finally:
        gate.set()
    return env


def test_a_keyed_retry_after_a_later_message_is_refused_not_stored_twice(
    dead_agents_message: dict[str, str],
) -> None:
    first = {"user_id": "ann", "payload": "first", "message_id": "k-1"}
    with agent_process(dead_agents_message) as (base, _):
        later = retried(lambda: httpx.post(f"{base}/", json={"user_id": "ann", "payload": "b"}))
        assert later.json()["response"] == "answer to b"
        retry = retried(lambda: httpx.post(f"{base}/", json=first, timeout=30))
        assert retry.status_code == 409, retry.text
        assert "k-1" in retry.json()["message"] and "new key" in retry.json()["message"]
        assert "retry-after" not in retry.headers
        (dialog,) = httpx.get(f"{base}/api/user/ann").json()
    # the first message is kept once, unanswered, before the later one
    assert [u["text"] for u in dialog["utterances"]] == ["first", "b", "answer to b"]


def test_a_message_with_another_key_is_another_message_even_with_the_same_text(
    dead_agents_message: dict[str, str],
) -> None:
    other = {"user_id": "ann", "payload": "first", "message_id": "k-2"}
    with agent_process(dead_agents_message) as (base, _):
        answer = retried(lambda: httpx.post(f"{base}/", json=other, timeout=30))
        assert answer.json()["response"] == "answer to first"
        (dialog,) = httpx.get(f"{base}/api/user/ann").json()
    stored = [(u["text"], u.get("message_key")) for u in dialog["utterances"]]
    assert stored == [("first", "chat:k-1"), ("first", "chat:k-2"), ("answer to first", None)]
