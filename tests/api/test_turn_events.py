"""Following a turn live: ``Accept: text/event-stream`` on the chat endpoints, over real
HTTP against the agent with real services."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi import FastAPI

from agent.sdk import DialogView, Service, SkillHypothesis, StreamStart
from annotators.tokens.app import app as tokens_app
from response_selectors.confidence.app import app as confidence_app
from skills.fallback.app import app as fallback_app
from skills.greeting.app import app as greeting_app
from skills.llm.app import LLMSettings
from skills.llm.app import create_app as llm_app
from tests.conftest import AgentFactory, service_entry
from tests.support.events import events_of, follow, names
from tests.support.openai_stream import StreamingOpenAI
from tests.support.services import (
    choosing_skill_selector,
    fixed_skill,
    last_index_selector,
    streaming_skill,
)

# Events are checked as they arrive, which only a served agent's stream shows.
pytestmark = pytest.mark.served

PIECES = ["Once ", "upon ", "a ", "time", "."]


def pipeline(services: Any, **skills: dict[str, Any]) -> dict[str, Any]:
    return {
        "services": {
            "annotators": {"tokens": service_entry(services(tokens_app).url)},
            "skills": skills
            or {
                "greeting": service_entry(services(greeting_app).url),
                "fallback": service_entry(services(fallback_app).url),
            },
            "response_selectors": {"confidence": service_entry(services(confidence_app).url)},
        },
        "fallback_response": "Nobody could answer.",
    }


def streaming_pipeline(services: Any, *chosen: str) -> dict[str, Any]:
    """A streaming skill ``story`` and the fallback skill; the selector runs ``chosen``."""
    config = pipeline(
        services,
        story=service_entry(services(streaming_skill("story", PIECES)).url, stream=True),
        fallback=service_entry(services(fallback_app).url),
    )
    config["services"]["skill_selectors"] = {
        "picker": service_entry(services(choosing_skill_selector(*chosen)).url)
    }
    return config


def comparable(dialog: dict[str, Any]) -> list[dict[str, Any]]:
    """A stored dialog's utterances without what differs between any two turns (ids,
    times, the user, call durations)."""
    volatile = {"utt_id", "date_time", "user", "trace"}
    return [{k: v for k, v in u.items() if k not in volatile} for u in dialog["utterances"]]


def test_the_events_end_with_the_json_reply_and_without_the_header_nothing_changes(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services))
    plain = client.post("/", json={"user_id": "ann", "payload": "Hello!"})
    assert plain.headers["content-type"] == "application/json"
    response, events = follow(client, "/", {"user_id": "bob", "payload": "Hello!"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")

    assert names(events)[0] == "accepted" and names(events)[-1] == "answer"
    accepted, answer = events[0][1], events[-1][1]
    progress = [data for kind, data in events if kind == "progress"]
    assert {p["service"]: p["role"] for p in progress} == {
        "tokens": "annotators",
        "greeting": "skills",
        "fallback": "skills",
        "confidence": "response_selectors",
    }
    assert all(p["outcome"] == "ok" and set(p) == {"service", "role", "outcome"} for p in progress)
    assert set(answer) == set(plain.json())
    expected = {**plain.json(), "user_id": "bob"}
    assert {k: answer[k] for k in ("response", "active_skill", "user_id")} == {
        k: expected[k] for k in ("response", "active_skill", "user_id")
    }
    dialog = client.get(f"/api/dialogs/{answer['dialog_id']}").json()
    human, bot = dialog["utterances"]
    assert accepted == {"dialog_id": answer["dialog_id"], "utt_id": human["utt_id"]}
    assert bot["utt_id"] == answer["utt_id"] and bot["text"] == answer["response"]


def test_the_parlai_endpoint_streams_its_act(services: Any, agent: AgentFactory) -> None:
    client = agent(pipeline(services))
    plain = client.post("/api/v1/chat", json={"user_id": "ann", "text": "Hello!"}).json()
    _, events = follow(client, "/api/v1/chat", {"user_id": "bob", "text": "Hello!"})
    assert names(events)[0] == "accepted"
    kind, act = events[-1]
    assert kind == "answer"
    assert set(act) == set(plain)
    assert (act["text"], act["id"]) == (plain["text"], plain["id"])


@pytest.mark.store_agnostic
def test_a_request_refused_before_the_turn_is_a_plain_error(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services))
    response, events = follow(client, "/", {"user_id": "bob"})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    assert events == []
    missing = client.post(
        "/", content=b"{}", headers={"Accept": "text/event-stream", "Content-Type": "text/plain"}
    )
    assert missing.status_code == 415


def test_an_idempotency_key_is_answered_once_as_for_json(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services))
    body = {"user_id": "bob", "payload": "Hello!"}
    _, first = follow(client, "/", body, **{"Idempotency-Key": "k-1"})
    _, again = follow(client, "/", body, **{"Idempotency-Key": "k-1"})
    assert again[-1] == first[-1]
    json_retry = client.post("/", json=body, headers={"Idempotency-Key": "k-1"}).json()
    assert json_retry == first[-1][1]
    dialog = client.get(f"/api/dialogs/{first[-1][1]['dialog_id']}").json()
    assert len(dialog["utterances"]) == 2


def test_a_chosen_streaming_skill_streams_its_tokens_before_the_turn_ends(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(streaming_pipeline(services, "story"))
    _, events = follow(client, "/", {"user_id": "bob", "payload": "Tell me a story"})
    tokens = [data for kind, data in events if kind == "token"]
    assert tokens == [{"text": piece, "skill": "story"} for piece in PIECES]
    order = names(events)
    story_done = next(
        i
        for i, (kind, data) in enumerate(events)
        if kind == "progress" and data["service"] == "story"
    )
    # Every token came while the skill was still answering, before the selector and reply.
    assert max(i for i, kind in enumerate(order) if kind == "token") < story_done
    assert order[-1] == "answer"
    answer = events[-1][1]
    assert answer["response"] == "".join(PIECES) and answer["active_skill"] == "story"


def test_the_services_done_reach_the_client_while_a_slow_skill_is_still_thinking(
    services: Any, agent: AgentFactory
) -> None:
    """The ``accepted`` and ``progress`` events are passed on in batches, never held until
    the answer's first token: a client watching the turn sees the services ticked off
    while a skill (an LLM) has not written a word."""
    gate = threading.Event()
    thinker = Service("thinker")

    @thinker.skill
    async def think(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
        told = await asyncio.to_thread(gate.wait, 5)
        yield StreamStart(confidence=0.9)
        yield "Ready." if told else "Nobody saw the turn go on while I thought."

    client = agent(
        pipeline(services, thinker=service_entry(services(thinker.app).url, 10.0, stream=True))
    )
    seen: list[str] = []
    try:
        with client.stream(
            "POST",
            "/",
            json={"user_id": "bob", "payload": "Think about it"},
            headers={"Accept": "text/event-stream"},
        ) as response:
            for kind, data in events_of(response.iter_lines()):
                seen.append(kind if kind != "progress" else f"progress {data['service']}")
                if kind == "progress" and data["service"] == "tokens":
                    gate.set()  # the annotator's end reached the client: the skill goes on
                if kind == "answer":
                    answer = data
    finally:
        gate.set()
    assert seen[:2] == ["accepted", "progress tokens"]
    assert seen.index("progress tokens") < seen.index("token")
    assert answer["response"] == "Ready." and answer["active_skill"] == "thinker"


def test_a_streaming_skill_that_may_not_be_chosen_sends_no_tokens(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(streaming_pipeline(services, "story", "fallback"))
    _, events = follow(client, "/", {"user_id": "bob", "payload": "Tell me a story"})
    assert "token" not in names(events)
    assert events[-1][1]["response"] == "".join(PIECES)


def test_a_streamed_turn_is_stored_as_a_json_turn_is(services: Any, agent: AgentFactory) -> None:
    client = agent(streaming_pipeline(services, "story"))
    dialogs = []
    for user in ("ann", "bob"):
        for text in ("Tell me a story", "Another one"):
            body = {"user_id": user, "payload": text}
            if user == "ann":
                reply = client.post("/", json=body).json()
            else:
                reply = follow(client, "/", body)[1][-1][1]
        dialogs.append(client.get(f"/api/dialogs/{reply['dialog_id']}").json())
    json_turns, streamed_turns = (comparable(d) for d in dialogs)
    assert streamed_turns == json_turns
    hypothesis = streamed_turns[0]["hypotheses"][0]
    assert hypothesis["text"] == "".join(PIECES) and hypothesis["told"] == len(PIECES)
    assert dialogs[0]["human"]["attributes"] == dialogs[1]["human"]["attributes"]


def test_a_skill_failing_mid_stream_costs_only_its_own_answer(
    services: Any, agent: AgentFactory
) -> None:
    config = streaming_pipeline(services, "story")
    broken = streaming_skill("story", ["Once ", "upon "], fail_after=1)
    config["services"]["skills"]["story"] = service_entry(services(broken).url, stream=True)
    client = agent(config)
    _, events = follow(client, "/", {"user_id": "bob", "payload": "Tell me a story"})
    assert [d["text"] for k, d in events if k == "token"] == ["Once "]
    kind, answer = events[-1]
    assert kind == "answer" and answer["response"] == "Nobody could answer."
    human = client.get(f"/api/dialogs/{answer['dialog_id']}").json()["utterances"][0]
    (error,) = human["errors"]
    assert error["service"] == "story" and "failed while streaming" in error["message"]


def test_the_llm_skill_streams_an_openai_compatible_endpoint_to_the_client(
    services: Any, agent: AgentFactory
) -> None:
    model = StreamingOpenAI(["Robots ", "cross ", "roads ", "carefully."])
    upstream = services(model.app)
    skill = llm_app(LLMSettings(_env_file=None, base_url=f"{upstream.url}/v1", model="tiny"))
    config = pipeline(
        services,
        llm=service_entry(services(skill).url, stream=True),
        fallback=service_entry(services(fallback_app).url),
    )
    config["services"]["skill_selectors"] = {
        "picker": service_entry(services(choosing_skill_selector("llm")).url)
    }
    client = agent(config)
    _, events = follow(client, "/", {"user_id": "bob", "payload": "Tell me a joke"})
    assert [d["text"] for k, d in events if k == "token"] == model.tokens
    assert model.requests[0]["stream"] is True
    kind, answer = events[-1]
    assert (kind, answer["response"]) == ("answer", "Robots cross roads carefully.")
    stored = client.get(f"/api/dialogs/{answer['dialog_id']}").json()["utterances"]
    assert stored[1]["text"] == answer["response"]
    assert stored[0]["hypotheses"][0]["llm_model"] == "tiny"


def test_streamed_calls_that_succeed_keep_the_skills_circuit_closed(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(streaming_pipeline(services, "story"))
    for turn in range(7):  # more than the breaker's threshold of failures in a row
        body = {"user_id": "bob", "payload": f"Story {turn}"}
        reply = (
            follow(client, "/", body)[1][-1][1] if turn % 2 else client.post("/", json=body).json()
        )
        assert reply["active_skill"] == "story", reply


def claiming_pipeline(services: Any, min_confidence: float) -> dict[str, Any]:
    """``story`` (announces 0.9) with a stream rule, ``tale``, and a response selector that
    always picks the last hypothesis (``tale``'s, as the executor orders them)."""
    story = services(streaming_skill("story", PIECES, confidence=0.9)).url
    return {
        "services": {
            "skills": {
                "story": service_entry(story, stream=True, stream_min_confidence=min_confidence),
                "tale": service_entry(services(fixed_skill("tale", "Something.", 0.3)).url),
            },
            "response_selectors": {"last": service_entry(services(last_index_selector()).url)},
        }
    }


def test_a_skill_announcing_its_minimum_confidence_streams_and_answers(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(claiming_pipeline(services, 0.8))
    json_reply = client.post("/", json={"user_id": "ann", "payload": "Tell me a story"}).json()
    _, events = follow(client, "/", {"user_id": "bob", "payload": "Tell me a story"})
    assert [d["text"] for k, d in events if k == "token"] == PIECES
    answer = events[-1][1]
    assert answer["active_skill"] == json_reply["active_skill"] == "story"
    progress = {d["service"]: d["outcome"] for k, d in events if k == "progress"}
    assert progress["last"] == "skipped"
    stored = [
        client.get(f"/api/dialogs/{reply['dialog_id']}").json() for reply in (json_reply, answer)
    ]
    assert comparable(stored[0]) == comparable(stored[1])
    bot = stored[1]["utterances"][1]
    assert bot["attributes"]["selector_reason"] == (
        "story announced confidence 0.9, at least its stream_min_confidence 0.8"
    )


def test_below_its_minimum_the_selector_chooses_as_always(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(claiming_pipeline(services, 0.95))
    _, events = follow(client, "/", {"user_id": "bob", "payload": "Tell me a story"})
    assert "token" not in names(events)
    assert events[-1][1]["active_skill"] == "tale"


def test_a_dp_agent_pipeline_reports_each_service_with_its_role_and_group(
    services: Any, agent: AgentFactory
) -> None:
    """A dp-agent service's progress event says its role and, apart, the group the file
    puts it under; a top-level service has none."""
    from tests.dream import services as dream
    from tests.dream.test_dream_behaviour import selector, skill

    eliza = services(dream.eliza()).url
    client = agent(
        {
            "services": {
                "skills": {"eliza": skill(eliza)},
                "chatter": {"echo": skill(eliza)},
                "response_selector": selector(services(dream.response_selector()).url),
            }
        }
    )
    response, events = follow(client, "/", {"user_id": "ann", "payload": "hello"})
    assert response.status_code == 200
    progress = {d["service"]: d for k, d in events if k == "progress"}
    assert progress == {
        "skills.eliza": {
            "service": "skills.eliza",
            "role": "skills",
            "dream_group": "skills",
            "outcome": "ok",
        },
        "chatter.echo": {
            "service": "chatter.echo",
            "role": "services",
            "dream_group": "chatter",
            "outcome": "ok",
        },
        "response_selector": {
            "service": "response_selector",
            "role": "services",
            "outcome": "ok",
        },
    }


def held_skill(arrived: threading.Event, gate: threading.Event) -> FastAPI:
    """Answers at once, except a message ``wait``: that call says it arrived, then waits
    for ``gate``."""
    service = Service("held")

    @service.skill
    def answer(dialog: DialogView) -> SkillHypothesis:  # a worker thread, free to block
        if dialog.utterances[-1].text == "wait":
            arrived.set()
            gate.wait(20)
        return SkillHypothesis(text=f"held: {dialog.utterances[-1].text}", confidence=0.9)

    return service.app


def test_each_followed_turn_gets_its_own_events_only(services: Any, agent: AgentFactory) -> None:
    """Two users following their turns at the same time: each stream tells its own turn's
    events, once, and never the other's."""
    arrived, gate = threading.Event(), threading.Event()
    client = agent(pipeline(services, held=service_entry(services(held_skill(arrived, gate)).url)))
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(follow, client, "/", {"user_id": "ann", "payload": "wait"})
        assert arrived.wait(20), "ann's turn never reached the held skill"
        try:
            _, bobs = follow(client, "/", {"user_id": "bob", "payload": "go"})
        finally:
            gate.set()
        _, anns = waiting.result()
    for events, text in ((anns, "held: wait"), (bobs, "held: go")):
        assert names(events) == ["accepted", "progress", "progress", "progress", "answer"]
        accepted, answer = events[0][1], events[-1][1]
        assert accepted["dialog_id"] == answer["dialog_id"] and answer["response"] == text
        assert [d["service"] for k, d in events if k == "progress"] == [
            "tokens",
            "held",
            "confidence",
        ]
    assert anns[0][1]["dialog_id"] != bobs[0][1]["dialog_id"]
