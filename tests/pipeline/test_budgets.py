"""Token budgets through the real agent, the LLM skill and a local OpenAI-compatible
endpoint that reports its ``usage``: the skill is told the most it may spend, and is no
longer called once a dialog's budget is spent."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi import FastAPI

from agent.sdk import DialogView, Service, SkillHypothesis, StreamStart
from skills.llm.app import LLMSettings
from skills.llm.app import create_app as llm_app
from tests.conftest import AgentFactory, service_entry
from tests.support.openai_stream import StreamingOpenAI
from tests.support.servers import serving
from tests.support.services import fixed_skill, streaming_skill

WORDS = ["one ", "two ", "three ", "four ", "five ", "six"]


def budget_pipeline(services: Any, model_url: str, **budget: int) -> dict[str, Any]:
    settings = LLMSettings(_env_file=None, base_url=model_url, model="test-model")
    shrug = Service("shrug")

    @shrug.skill
    def answer(dialog: DialogView) -> SkillHypothesis:
        return SkillHypothesis(text="I don't know.", confidence=0.1)

    return {
        "services": {
            "skills": {
                "shrug": service_entry(services(shrug.app).url),
                "llm": service_entry(
                    services(llm_app(settings)).url,
                    stream=True,
                    tier=1,
                    run_below=0.5,
                    budget=budget,
                ),
            }
        }
    }


def test_the_llm_is_told_its_per_turn_budget_and_stops_when_the_dialog_s_is_spent(
    services: Any, agent: AgentFactory
) -> None:
    model = StreamingOpenAI(WORDS)
    with serving(model.app) as endpoint:
        # each answer costs 3 tokens at most (per turn) plus its prompt's messages
        client = agent(budget_pipeline(services, f"{endpoint.url}/v1", per_turn=3, per_dialog=9))
        answers = [
            client.post("/", json={"user_id": "ann", "payload": f"Tell me {n}"}).json()
            for n in range(3)
        ]
        other = client.post("/", json={"user_id": "bob", "payload": "Tell me"}).json()
    assert [a["active_skill"] for a in answers] == ["llm", "llm", "shrug"]
    assert other["active_skill"] == "llm"  # another dialog has its own budget
    assert [body["max_tokens"] for body in model.requests] == [3, 3, 3]
    (dialog,) = client.get("/api/user/ann").json()
    spent = dialog["bot"]["attributes"]["tokens_spent"]["llm"]
    assert spent >= 9  # 2 + 3, then 4 + 3 tokens: the second call spent the budget
    last = dialog["utterances"][4]
    assert {c["service"]: c["outcome"] for c in last["trace"]}["llm"] == "skipped"


def test_a_day_s_budget_holds_across_dialogs(services: Any, agent: AgentFactory) -> None:
    model = StreamingOpenAI(WORDS)
    with serving(model.app) as endpoint:
        client = agent(budget_pipeline(services, f"{endpoint.url}/v1", per_day=10))
        answers = [
            client.post("/", json={"user_id": user, "payload": "Tell me"}).json()
            for user in ("ann", "bob", "cid")
        ]
        metrics = client.get("/metrics").text
    # ann's answer costs 2 + 6 tokens; bob may spend only the 2 left: 2 + 2; cid nothing
    assert [a["active_skill"] for a in answers] == ["llm", "llm", "shrug"]
    assert [body["max_tokens"] for body in model.requests] == [10, 2]
    assert 'chorus_skill_tokens_total{skill="llm"} 12.0' in metrics


def test_turns_running_together_keep_within_the_day_s_budget(
    services: Any, agent: AgentFactory
) -> None:
    """Each admitted call holds its allowance from the day's count at once: 20 turns at
    once spend at most the day's 500 tokens and one reply's maximum, not 20 replies."""
    hold = threading.Event()
    model = StreamingOpenAI([f"w{n} " for n in range(60)], hold=hold)
    users = [f"user{n}" for n in range(20)]
    with serving(model.app) as endpoint:
        client = agent(budget_pipeline(services, f"{endpoint.url}/v1", per_turn=50, per_day=500))

        def ask(user: str) -> dict[str, Any]:
            reply: dict[str, Any] = client.post("/", json={"user_id": user, "payload": "Hi"}).json()
            return reply

        with ThreadPoolExecutor(max_workers=len(users)) as pool:
            replies = [pool.submit(ask, user) for user in users]
            deadline = time.monotonic() + 60
            # every turn is at the model, or answered without it: all ran together
            while len(model.requests) + sum(r.done() for r in replies) < len(users):
                assert time.monotonic() < deadline, "the turns never all reached their skills"
                hold.wait(0.05)
            hold.set()
            answers = [r.result()["active_skill"] for r in replies]
        metrics = client.get("/metrics").text
    spent = model.spent()  # a call costs 2 prompt tokens and its 50 tokens at most
    assert spent <= 500 + 50, spent
    assert answers.count("llm") == len(model.requests) == 10
    assert f'chorus_skill_tokens_total{{skill="llm"}} {float(spent)}' in metrics


def test_a_user_s_budget_holds_across_their_dialogs(services: Any, agent: AgentFactory) -> None:
    model = StreamingOpenAI(WORDS)
    with serving(model.app) as endpoint:
        client = agent(budget_pipeline(services, f"{endpoint.url}/v1", per_user=20))
        answers = []
        for _ in range(4):  # each message in a dialog of its own
            answers.append(client.post("/", json={"user_id": "ann", "payload": "Hi"}).json())
            client.post("/", json={"user_id": "ann", "payload": "/start"})
        other = client.post("/", json={"user_id": "bob", "payload": "Hi"}).json()
    # 2 + 6 tokens, 2 + 6, then 2 + the 4 left: ann has spent her 20 tokens of the day
    assert [a["active_skill"] for a in answers] == ["llm", "llm", "llm", "shrug"]
    assert other["active_skill"] == "llm"  # another user has a budget of their own
    assert [body["max_tokens"] for body in model.requests] == [20, 12, 4, 20]
    dialogs = client.get("/api/user/ann").json()
    assert len(dialogs) == 4
    last = dialogs[-1]["utterances"][0]
    assert {c["service"]: c["outcome"] for c in last["trace"]}["llm"] == "skipped"


def story_pipeline(services: Any, story: FastAPI, **budget: int) -> dict[str, Any]:
    return {
        "services": {
            "skills": {
                "shrug": service_entry(services(fixed_skill("shrug", "I don't know.", 0.1)).url),
                "story": service_entry(
                    services(story).url, stream=True, tier=1, run_below=0.5, budget=budget
                ),
            }
        }
    }


def test_a_stream_past_its_allowance_is_cut_and_what_it_sent_is_counted(
    services: Any, agent: AgentFactory
) -> None:
    """A streaming skill that does not keep to the max_tokens it is told is cut off at its
    allowance; its pieces count against its budget, as a failed stream's do."""
    pieces = [f"p{n} " for n in range(10)]
    client = agent(story_pipeline(services, streaming_skill("story", pieces, 0.8), per_turn=3))
    reply = client.post("/", json={"user_id": "ann", "payload": "Tell me a story"}).json()
    assert reply["active_skill"] == "shrug"
    (dialog,) = client.get("/api/user/ann").json()
    (error,) = dialog["utterances"][0]["errors"]
    assert (error["service"], error["kind"]) == ("story", "refused")
    assert "streamed past its token allowance of 3" in error["message"]
    assert dialog["bot"]["attributes"]["tokens_spent"] == {"story": 4}

    broken = agent(
        story_pipeline(
            services, streaming_skill("story", pieces, 0.8, fail_after=2), per_dialog=100
        )
    )
    broken.post("/", json={"user_id": "bob", "payload": "Tell me a story"})
    (dialog,) = broken.get("/api/user/bob").json()
    assert dialog["bot"]["attributes"]["tokens_spent"] == {"story": 2}


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds a skill mid-answer until the test ends."""
    event = threading.Event()
    yield event
    event.set()


def test_a_dropped_stream_s_pieces_are_counted(
    services: Any, agent: AgentFactory, gate: threading.Event
) -> None:
    """A speculative skill dropped mid-stream spent what it streamed: its pieces count."""
    told = threading.Event()
    story, cheap = Service("story"), Service("cheap")

    @story.skill
    async def tell(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
        yield StreamStart(confidence=0.9)
        yield "Once "
        yield "upon "
        told.set()  # both pieces are sent: the cheap skill may answer, and drop this one
        await asyncio.to_thread(gate.wait, 30)
        yield "a time."

    @cheap.skill
    def answer(dialog: DialogView) -> SkillHypothesis:  # sync: a worker thread waits
        assert told.wait(30), "the story never told its first pieces"
        return SkillHypothesis(text="Cheap.", confidence=0.9)

    client = agent(
        {
            "services": {
                "skills": {
                    "cheap": service_entry(services(cheap.app).url, timeout=30.0),
                    "story": service_entry(
                        services(story.app).url,
                        timeout=30.0,
                        stream=True,
                        tier=1,
                        run_below=0.5,
                        speculative=True,
                        budget={"per_dialog": 100},
                    ),
                }
            },
            "turn_timeout": 60.0,
        }
    )
    reply = client.post("/", json={"user_id": "ann", "payload": "Tell me a story"}).json()
    assert reply["active_skill"] == "cheap"
    (dialog,) = client.get("/api/user/ann").json()
    trace = {c["service"]: c["outcome"] for c in dialog["utterances"][0]["trace"]}
    assert trace["story"] == "dropped"
    assert dialog["bot"]["attributes"]["tokens_spent"] == {"story": 2}
