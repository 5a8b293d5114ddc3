"""The circuit breaker and the retry of unopened connections."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import httpx
import pytest
from fastapi import FastAPI, HTTPException

from agent.connectors.base import Connector, Line
from agent.connectors.breaker import CircuitBreaker, GuardedConnector
from agent.connectors.errors import BadServiceStatus, ServiceUnavailable
from agent.sdk import Service, SkillHypothesis
from agent.sdk.models import DialogView
from tests.conftest import AgentFactory, service_entry
from tests.support.services import counting_failure, fixed_skill
from tests.support.views import view


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_circuit_opens_after_failures_in_a_row_and_retries_later() -> None:
    clock = Clock()
    breaker = CircuitBreaker("s", threshold=2, reset_after=10, clock=clock)
    breaker.before_call()
    breaker.record(ok=False)
    breaker.before_call()
    breaker.record(ok=False)
    with pytest.raises(ServiceUnavailable, match="circuit open after 2 failures"):
        breaker.before_call()
    clock.now = 10.0
    breaker.before_call()  # the trial call
    with pytest.raises(ServiceUnavailable):
        breaker.before_call()  # only one trial at a time
    breaker.record(ok=True)
    assert not breaker.is_open
    breaker.before_call()


def test_a_failed_trial_opens_the_circuit_again() -> None:
    clock = Clock()
    breaker = CircuitBreaker("s", threshold=1, reset_after=5, clock=clock)
    breaker.record(ok=False)
    clock.now = 5.0
    breaker.before_call()
    breaker.record(ok=False)
    with pytest.raises(ServiceUnavailable):
        breaker.before_call()


class Scripted(Connector[DialogView]):
    """A connector that fails as told."""

    name = "scripted"

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def call(self, views: list[DialogView]) -> list[Any]:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return [["ok"] for _ in views]


async def test_only_unopened_connections_are_retried() -> None:
    refused = ServiceUnavailable("scripted", "refused", never_connected=True)
    inner = Scripted(refused)
    guarded = GuardedConnector(inner, CircuitBreaker("scripted", 5, 10), retries=1)
    assert await guarded.call([]) == []
    assert inner.calls == 2

    broken = Scripted(ServiceUnavailable("scripted", "reset mid-answer"))
    guarded = GuardedConnector(broken, CircuitBreaker("scripted", 5, 10), retries=3)
    with pytest.raises(ServiceUnavailable, match="reset mid-answer"):
        await guarded.call([])
    assert broken.calls == 1

    status = Scripted(BadServiceStatus("scripted", 500, "x"))
    guarded = GuardedConnector(status, CircuitBreaker("scripted", 5, 10), retries=3)
    with pytest.raises(BadServiceStatus):
        await guarded.call([])
    assert status.calls == 1


class Streaming(Scripted):
    """Streams two tokens, then its end."""

    async def stream(self, payload: DialogView) -> AsyncIterator[Line]:
        yield "token", "a"
        yield "token", "b"
        yield "end", ["ok"]


async def test_a_trial_that_ends_without_a_verdict_frees_the_trial() -> None:
    """A bug in the agent's own code, or a stream it stops reading, says nothing about the
    service: the circuit stays open, and the next call is the trial."""
    clock = Clock()
    breaker = CircuitBreaker("scripted", threshold=1, reset_after=5, clock=clock)
    breaker.record(ok=False)
    clock.now = 5.0
    guarded = GuardedConnector(Scripted(RuntimeError("a bug")), breaker, retries=0)
    with pytest.raises(RuntimeError):
        await guarded.call([])
    assert breaker.is_open
    streamed = GuardedConnector(Streaming(), breaker, retries=0)
    dialog = DialogView.model_validate(view("hi"))
    lines = cast(AsyncGenerator[Line, None], streamed.stream(dialog))
    assert await anext(lines) == ("token", "a")  # the trial
    await lines.aclose()  # read no further
    assert breaker.is_open
    assert [line async for line in streamed.stream(dialog)][-1] == ("end", ["ok"])
    assert not breaker.is_open


def test_an_open_circuit_spares_a_failing_service(services: Any, agent: AgentFactory) -> None:
    failing, seen = counting_failure()
    client = agent(
        {
            "services": {
                "skills": {
                    "failing": {
                        "connector": {
                            "url": f"{services(failing).url}/respond",
                            "breaker_threshold": 2,
                            "breaker_reset": 600,
                        }
                    },
                    "steady": service_entry(services(fixed_skill("steady", "still here", 0.5)).url),
                }
            }
        }
    )
    kinds = []
    for _ in range(4):
        reply = client.post("/", json={"user_id": "u", "payload": "hi"}).json()
        assert reply["response"] == "still here"
        dialog = client.get(f"/api/dialogs/{reply['dialog_id']}").json()
        kinds.append(dialog["utterances"][-2]["errors"][0]["kind"])
    assert kinds == ["bad_status", "bad_status", "unavailable", "unavailable"]
    assert len(seen) == 2
    assert "circuit open" in dialog["utterances"][-2]["errors"][0]["message"]


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds a service's calls until the test ends."""
    event = threading.Event()
    yield event
    event.set()


def mood_skill(name: str, confident_on: str) -> FastAPI:
    """Answers every message, confidently only the one saying ``confident_on``."""
    service = Service(name)

    @service.skill
    def answer(dialog: DialogView) -> SkillHypothesis:
        sure = dialog.human_utterance.text == confident_on
        return SkillHypothesis(text=f"{name} says hi", confidence=0.9 if sure else 0.1)

    return service.app


def moody_llm(gate: threading.Event) -> FastAPI:
    """Fails "hard" messages with a 500, holds "easy" ones at the gate, answers the rest."""
    service = Service("llm")

    @service.skill
    def answer(dialog: DialogView) -> SkillHypothesis:  # sync: a worker thread waits
        text = dialog.human_utterance.text
        if text == "hard":
            raise HTTPException(500, "overloaded")
        if text == "easy":
            gate.wait(30)
        return SkillHypothesis(text="the llm answers", confidence=0.9)

    return service.app


def outcome(client: httpx.Client, reply: dict[str, Any], service: str) -> tuple[str, str]:
    """The service's outcome in the reply's turn, and its error's message if it failed."""
    utterances = client.get(f"/api/dialogs/{reply['dialog_id']}").json()["utterances"]
    (index,) = [i for i, u in enumerate(utterances) if u["utt_id"] == reply["utt_id"]]
    human = utterances[index - 1]  # the reply's is the bot's, the turn's the human's
    errors = [e["message"] for e in human["errors"] if e["service"] == service]
    calls = {c["service"]: c["outcome"] for c in human["trace"]}
    return calls[service], errors[0] if errors else ""


def test_a_dropped_trial_leaves_the_circuit_ready_to_try_again(
    services: Any, agent: AgentFactory, gate: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    llm = service_entry(
        services(moody_llm(gate)).url, tier=1, run_below=0.5, speculative=True, timeout=30.0
    )
    llm["connector"]["breaker_reset"] = 0.2
    client = agent(
        {
            "services": {
                "skills": {
                    "cheap": service_entry(services(mood_skill("cheap", "easy")).url),
                    "llm": llm,
                }
            },
            "turn_timeout": 60.0,
        }
    )

    def say(text: str) -> dict[str, Any]:
        reply: dict[str, Any] = client.post("/", json={"user_id": "ann", "payload": text}).json()
        return reply

    with caplog.at_level(logging.WARNING, logger="chorus.connectors"):
        for _ in range(5):  # the default breaker_threshold: the circuit opens
            reply = say("hard")
            assert outcome(client, reply, "llm")[0] == "error"
    # Said by the log, not by a sixth turn: on a busy machine that turn can come after
    # breaker_reset and be the trial call itself.
    assert "llm failed 5 times in a row: circuit open" in caplog.text
    # Once breaker_reset has passed, a turn takes the trial call, and the cheap skill's
    # confident answer drops it; until then the circuit answers "circuit open" at once.
    deadline = time.monotonic() + 30
    while outcome(client, reply := say("easy"), "llm")[0] != "dropped":
        assert time.monotonic() < deadline, "the trial call was never made"
    assert reply["active_skill"] == "cheap"
    # The drop said nothing about the service: the next turn tries it again.
    reply = say("tell me more")
    assert outcome(client, reply, "llm") == ("ok", "")
    assert (reply["active_skill"], reply["response"]) == ("llm", "the llm answers")


def test_interrupting_one_s_own_turn_is_no_failure_of_the_service(
    services: Any, agent: AgentFactory, gate: threading.Event
) -> None:
    """One user's rapid messages under the interrupt policy cancel call after call of a
    slow but healthy skill: none of it opens the skill's circuit for another user."""
    texts = [f"ann {n}" for n in range(6)]
    arrived = {text: threading.Event() for text in texts}
    slow = Service("slow")

    @slow.skill
    def answer(dialog: DialogView) -> SkillHypothesis:  # sync: a worker thread waits
        text = dialog.human_utterance.text
        if text in arrived:
            arrived[text].set()
            gate.wait(30)
        return SkillHypothesis(text=f"answer to {text}", confidence=0.9)

    client = agent(
        {
            "services": {"skills": {"slow": service_entry(services(slow.app).url, timeout=30.0)}},
            "turn_timeout": 60.0,
            "double_texting": "interrupt",
        }
    )

    def say(user: str, text: str) -> httpx.Response:
        return client.post("/", json={"user_id": user, "payload": text})

    with ThreadPoolExecutor(max_workers=len(texts)) as pool:
        sent = []
        for text in texts[:-1]:  # each interrupts the one before, mid-call
            sent.append(pool.submit(say, "ann", text))
            assert arrived[text].wait(30), f"{text!r} never reached the skill"
        last = pool.submit(say, "ann", texts[-1])  # the fifth interrupted call
        deadline = time.monotonic() + 30
        while not (arrived[texts[-1]].wait(0.05) or last.done()):
            assert time.monotonic() < deadline, "the last message was never answered"
        assert [f.result().status_code for f in sent] == [409] * len(sent)
        other = say("bob", "hello").json()
        gate.set()
        answered = last.result().json()
    assert other["response"] == "answer to hello"
    assert answered["response"] == f"answer to {texts[-1]}"


def test_calls_their_time_limit_ends_open_the_circuit(
    services: Any, agent: AgentFactory, gate: threading.Event
) -> None:
    """The call's own timeout is the service's failure, whichever timer ends it."""
    silent = Service("silent")

    @silent.skill
    def answer(dialog: DialogView) -> SkillHypothesis:  # sync: a worker thread waits
        gate.wait(30)
        return SkillHypothesis(text="too late", confidence=0.9)

    entry = service_entry(services(silent.app).url, timeout=0.2)
    entry["connector"]["breaker_threshold"] = 2
    client = agent({"services": {"skills": {"silent": entry}}})
    replies = [client.post("/", json={"user_id": "ann", "payload": "hi"}).json() for _ in range(3)]
    kinds = [outcome(client, reply, "silent") for reply in replies]
    assert [kind for kind, _ in kinds] == ["timeout", "timeout", "error"]
    assert "circuit open after 2 failures" in kinds[2][1]
