"""The turn end to end: real services on 127.0.0.1, the real agent, over HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from annotators.tokens.app import app as tokens_app
from response_selectors.confidence.app import app as confidence_app
from skills.fallback.app import app as fallback_app
from skills.greeting.app import app as greeting_app
from tests.conftest import AgentFactory, service_entry
from tests.support.ports import free_port
from tests.support.services import raw_app, window_reporter


def say(client: httpx.Client, text: str, user: str = "alice", **extra: Any) -> dict[str, Any]:
    response = client.post("/", json={"user_id": user, "payload": text, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def reference_pipeline(services: Any, **extra_skills: dict[str, Any]) -> dict[str, Any]:
    return {
        "services": {
            "annotators": {"tokens": service_entry(services(tokens_app).url)},
            "skills": {
                "greeting": service_entry(services(greeting_app).url),
                "fallback": service_entry(services(fallback_app).url),
                **extra_skills,
            },
            "response_selectors": {"confidence": service_entry(services(confidence_app).url)},
        },
        "fallback_response": "Nobody could answer.",
    }


@pytest.mark.both_stores
def test_a_turn_stores_annotations_hypotheses_and_the_chosen_answer(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(reference_pipeline(services))
    reply = say(client, "Hello there. How are you?")
    assert reply["active_skill"] == "greeting"
    assert reply["response"] == "Hi! I'm Chorus. What's your name?"
    assert reply["user_id"] == "alice"

    dialog = client.get(f"/api/dialogs/{reply['dialog_id']}").json()
    human, bot = dialog["utterances"]
    assert human["text"] == "Hello there. How are you?"
    assert human["annotations"]["tokens"]["sentences"] == ["Hello there.", "How are you?"]
    assert {h["skill_name"] for h in human["hypotheses"]} == {"greeting", "fallback"}
    assert human["errors"] == []
    assert bot["utt_id"] == reply["utt_id"]
    assert bot["active_skill"] == "greeting"
    assert bot["text"] == reply["response"]
    assert "greeting had the highest confidence" in bot["attributes"]["selector_reason"]
    assert dialog["human"]["user_external_id"] == "alice"
    assert {(c["service"], c["role"], c["dream_group"]) for c in human["trace"]} == {
        ("tokens", "annotators", None),
        ("greeting", "skills", None),
        ("fallback", "skills", None),
        ("confidence", "response_selectors", None),
    }


def test_attributes_of_the_chosen_hypothesis_are_remembered_on_the_next_turns(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(reference_pipeline(services))
    say(client, "hi")
    assert say(client, "Ann")["response"].startswith("Nice to meet you, Ann")
    assert say(client, "what is my name?")["response"] == "Your name is Ann."
    other = say(client, "the weather is odd today")
    assert other["active_skill"] == "fallback"
    dialog = client.get(f"/api/dialogs/{other['dialog_id']}").json()
    assert dialog["human"]["attributes"] == {"name": "Ann", "greeting_stage": "done"}
    assert [u["speaker"] for u in dialog["utterances"]] == ["human", "bot"] * 4


@pytest.mark.both_stores
def test_the_human_profile_outlives_the_dialog(services: Any, agent: AgentFactory) -> None:
    client = agent(reference_pipeline(services))
    say(client, "my name is Bob", user="bob")
    closed = say(client, "/start", user="bob")
    assert closed["active_skill"] is None
    after = say(client, "hello", user="bob")
    assert after["dialog_id"] != closed["dialog_id"]
    assert after["response"] == "Hello again, Bob!"
    dialogs = client.get("/api/user/bob").json()
    assert len(dialogs) == 2
    assert dialogs[0]["date_finish"] is not None and dialogs[1]["date_finish"] is None


def test_services_see_only_their_window_and_the_profiles_attributes(
    services: Any, agent: AgentFactory
) -> None:
    pipeline = reference_pipeline(
        services, reporter=service_entry(services(window_reporter()).url, context_window=3)
    )
    client = agent(pipeline)
    for text in ["one", "two", "three"]:
        reply = say(client, text, mood="calm")
    dialog = client.get(f"/api/dialogs/{reply['dialog_id']}").json()
    last = dialog["utterances"][-2]
    reporter = next(h for h in last["hypotheses"] if h["skill_name"] == "reporter")
    assert reporter["seen"] == ["two", dialog["utterances"][-3]["text"], "three"]
    assert reporter["seen_annotations"] == ["tokens"]
    assert last["attributes"] == {"mood": "calm"}


def test_faulty_skills_cost_only_their_own_output(services: Any, agent: AgentFactory) -> None:
    from tests.support.services import fixed_skill

    slow = services(fixed_skill("slow", "too late", 1.0, delay=2.0))
    garbage = services(raw_app(b"<html>oops</html>"))
    wrong_shape = services(raw_app(json_body={"answer": "not a list"}))
    failing = services(raw_app(b"boom", status=500))
    down_url = f"http://127.0.0.1:{free_port()}"
    pipeline = reference_pipeline(
        services,
        slow=service_entry(slow.url, timeout=0.3),
        garbage=service_entry(garbage.url),
        wrong_shape=service_entry(wrong_shape.url),
        failing=service_entry(failing.url),
        down=service_entry(down_url),
    )
    client = agent(pipeline)
    reply = say(client, "hello")
    assert reply["active_skill"] == "greeting"
    human = client.get(f"/api/dialogs/{reply['dialog_id']}").json()["utterances"][0]
    errors = {e["service"]: e for e in human["errors"]}
    assert errors["slow"]["kind"] == "timeout"
    assert errors["garbage"]["kind"] == "bad_response"
    assert "not JSON" in errors["garbage"]["message"]
    assert errors["wrong_shape"]["kind"] == "bad_response"
    assert errors["failing"]["kind"] == "bad_status"
    assert "500" in errors["failing"]["message"]
    assert errors["down"]["kind"] == "unavailable"
    assert {h["skill_name"] for h in human["hypotheses"]} == {"greeting", "fallback"}


def test_no_surviving_hypothesis_gives_the_configured_fallback(
    services: Any, agent: AgentFactory
) -> None:
    down_url = f"http://127.0.0.1:{free_port()}"
    client = agent(
        {
            "services": {"skills": {"down": service_entry(down_url)}},
            "fallback_response": "Nobody could answer.",
        }
    )
    reply = say(client, "hello")
    assert reply["response"] == "Nobody could answer."
    assert reply["active_skill"] == "fallback_response"
    dialog = client.get(f"/api/dialogs/{reply['dialog_id']}").json()
    assert dialog["utterances"][0]["errors"][0]["service"] == "down"


def test_the_turn_deadline_bounds_a_hanging_pipeline(services: Any, agent: AgentFactory) -> None:
    """A skill that would answer after 30 s, within its own timeout, is cut at the turn's
    deadline and the quick skill's answer is given. The deadline (2 s) leaves the quick
    skill time to answer on a busy machine: at 0.5 s it was cut too, once, in CI."""
    from tests.support.services import fixed_skill

    hanging = services(fixed_skill("hanging", "never", 1.0, delay=30.0))
    client = agent(
        {
            "services": {
                "skills": {
                    "quick": service_entry(services(fixed_skill("quick", "quick one", 0.2)).url),
                    "hanging": service_entry(hanging.url, timeout=60.0),
                }
            },
            "turn_timeout": 2.0,
        }
    )
    reply = say(client, "hello")
    assert reply["response"] == "quick one"
    human = client.get(f"/api/dialogs/{reply['dialog_id']}").json()["utterances"][0]
    assert human["errors"] == [
        {"service": "hanging", "kind": "timeout", "message": "turn deadline of 2.0s reached"}
    ]


def test_an_oversized_answer_is_refused_and_recorded(services: Any, agent: AgentFactory) -> None:
    huge = services(raw_app(b"[" + b"1," * 5_000_000 + b"1]"))
    client = agent(reference_pipeline(services, huge=service_entry(huge.url, timeout=10)))
    reply = say(client, "hello")
    assert reply["active_skill"] == "greeting"
    human = client.get(f"/api/dialogs/{reply['dialog_id']}").json()["utterances"][0]
    (error,) = human["errors"]
    assert (error["service"], error["kind"]) == ("huge", "bad_response")
    assert "over the 2097152" in error["message"]
