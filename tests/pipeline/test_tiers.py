"""Tiers through the real agent and real local services: a skill of a higher tier runs
only when the cheaper ones have no confident answer, a speculative one is dropped the
moment they do, and a streaming one passes its tokens on once it is the only candidate."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI

from agent.sdk import DialogView, Service, SkillHypothesis
from response_selectors.confidence.app import app as confidence_app
from tests.conftest import AgentFactory, service_entry
from tests.support.events import follow
from tests.support.services import fixed_skill, gated_story, streaming_skill

PIECES = ["Once ", "upon ", "a ", "time", "."]


def counting_skill(name: str, calls: list[str]) -> FastAPI:
    """Answers confidently, and counts the turns it was called for."""
    service = Service(name)

    @service.skill
    def answer(dialog: DialogView) -> SkillHypothesis:
        calls.append(dialog.human_utterance.text)
        return SkillHypothesis(text=f"{name} says hi", confidence=0.9)

    return service.app


def tiered(services: Any, cheap: float, **expensive: dict[str, Any]) -> dict[str, Any]:
    """``cheap`` (tier 0) answering with confidence ``cheap``, and the ``expensive`` skills."""
    return {
        "services": {
            "skills": {
                "cheap": service_entry(services(fixed_skill("cheap", "Cheap.", cheap)).url),
                **expensive,
            },
            "response_selectors": {"confidence": service_entry(services(confidence_app).url)},
        }
    }


def test_a_higher_tier_runs_only_when_the_cheaper_answer_is_not_confident(
    services: Any, agent: AgentFactory
) -> None:
    calls: list[str] = []
    expensive = service_entry(services(counting_skill("costly", calls)).url, tier=1, run_below=0.5)
    sure = agent(tiered(services, 0.8, costly=expensive))
    answer = sure.post("/", json={"user_id": "ann", "payload": "sure"}).json()
    assert (answer["active_skill"], calls) == ("cheap", [])
    (dialog,) = sure.get("/api/user/ann").json()
    trace = {c["service"]: c["outcome"] for c in dialog["utterances"][0]["trace"]}
    assert trace["costly"] == "skipped"

    unsure = agent(tiered(services, 0.3, costly=expensive))
    answer = unsure.post("/", json={"user_id": "bob", "payload": "unsure"}).json()
    assert (answer["active_skill"], calls) == ("costly", ["unsure"])


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds a skill mid-answer until the test ends."""
    event = threading.Event()
    yield event
    event.set()


def test_a_speculative_skill_is_dropped_when_a_cheaper_one_answers_confidently(
    services: Any, agent: AgentFactory, gate: threading.Event
) -> None:
    story = service_entry(
        services(gated_story(gate)).url,
        timeout=30.0,
        stream=True,
        tier=1,
        run_below=0.5,
        speculative=True,
    )
    story["connector"]["breaker_threshold"] = 1  # one failure opens it: a drop is none
    client = agent({**tiered(services, 0.8, story=story), "turn_timeout": 60.0})
    for user in ("ann", "bob"):
        _, events = follow(client, "/", {"user_id": user, "payload": "Tell me a story"})
        kind, answer = events[-1]
        assert (kind, answer["active_skill"]) == ("answer", "cheap")
        # what the story wrote before it was dropped never reached the client
        assert [d for k, d in events if k == "token"] == []
        progress = {d["service"]: d["outcome"] for k, d in events if k == "progress"}
        assert progress["story"] == "dropped"
    (dialog,) = client.get("/api/user/bob").json()
    assert {c["service"]: c["outcome"] for c in dialog["utterances"][0]["trace"]}["story"] == (
        "dropped"
    )
    metrics = client.get("/metrics").text
    assert 'chorus_skill_dropped_total{skill="story"} 2.0' in metrics
    assert 'chorus_skill_calls_total{skill="story"} 2.0' in metrics
    assert 'chorus_skill_calls_total{skill="cheap"} 2.0' in metrics
    story_stats = client.get("/api/pipeline").json()["stats"]["story"]
    assert (story_stats["dropped"], story_stats["errors"]) == (2, 0)  # a drop is no failure


def test_a_speculative_streaming_skill_streams_once_the_cheaper_ones_fall_short(
    services: Any, agent: AgentFactory
) -> None:
    story = service_entry(
        services(streaming_skill("story", PIECES, confidence=0.8)).url,
        stream=True,
        tier=1,
        run_below=0.5,
        speculative=True,
    )
    client = agent(tiered(services, 0.3, story=story))
    json_answer = client.post("/", json={"user_id": "ann", "payload": "Tell me a story"}).json()
    _, events = follow(client, "/", {"user_id": "bob", "payload": "Tell me a story"})
    assert [d["text"] for k, d in events if k == "token"] == PIECES
    kind, answer = events[-1]
    assert (kind, answer["active_skill"]) == ("answer", "story")
    assert answer["response"] == json_answer["response"] == "".join(PIECES)


def test_a_streaming_skill_with_a_more_confident_rival_sends_no_tokens(
    services: Any, agent: AgentFactory
) -> None:
    """The cheaper answer fell short of the run_below but is surer than the skill says it
    is: it still competes, and wins, so the skill's tokens must not reach the client."""
    story = service_entry(
        services(streaming_skill("story", PIECES, confidence=0.3)).url,
        stream=True,
        tier=1,
        run_below=0.5,
    )
    client = agent(tiered(services, 0.4, story=story))
    _, events = follow(client, "/", {"user_id": "bob", "payload": "Tell me a story"})
    assert "token" not in [k for k, _ in events]
    kind, answer = events[-1]
    assert (kind, answer["active_skill"]) == ("answer", "cheap")
