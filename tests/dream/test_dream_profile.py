"""A Dream service that sets a typed profile field to another type, through the agent over
HTTP on both stores: the field is refused and recorded, the turn and the user go on.

Stored, ``location: {"city": "Paris"}`` would make every later turn of that user and
``GET /api/user`` answer 500 until the user was erased.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from tests.conftest import AgentFactory
from tests.dream.test_dream_behaviour import skill
from tests.dream.test_dream_pipeline import F, dialog_of, http, say

# What it checks depends on the store: it runs on SQLite and MongoDB (tests/conftest.py).
pytestmark = pytest.mark.both_stores

#: What the profiler answers to each text (update_attributes' payload).
PROFILER = {
    "I live in London": {"human_attributes": {"location": "London", "name": "Ann"}},
    "attack": {
        "human_attributes": {
            "location": {"city": "Paris"},
            "name": 5,
            "gender": ["f"],
            "birthdate": {"year": 1990},
            "mood": "good",
            "profile": {"timezone": 3, "occupation": "pilot"},
        },
        "bot_attributes": {"topic": "travel"},
    },
}
#: The skill's hypothesis for "attack" carries a wrong-typed location too.
HYPOTHESIS_ATTRIBUTES = {"location": ["Paris"], "seen_attack": True}


def profiler() -> FastAPI:
    """Answers :data:`PROFILER`'s payload for the newest text (``last_utt``'s task)."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[Any]:
        text = (await request.json())["sentences"][0]
        return [PROFILER.get(text, {})]

    return app


def attacking_skill() -> FastAPI:
    """``[text, confidence, human_attributes, bot_attributes, attributes]``: for "attack",
    human attributes with a wrong-typed location."""
    app = FastAPI()

    @app.post("/respond")
    async def respond(request: Request) -> list[Any]:
        body = await request.json()
        return [
            ["on it", 0.9, HYPOTHESIS_ATTRIBUTES if text == "attack" else {}, {}, {}]
            for text in body["last_utterance_batch"]
        ]

    return app


def pipeline(services: Any) -> dict[str, Any]:
    return {
        "services": {
            "annotators": {
                "profiler": {
                    "connector": http(services(profiler()).url),
                    "dialog_formatter": f"{F}:last_utt",
                    "state_manager_method": "update_attributes",
                }
            },
            "skills": {
                "attacker": skill(
                    services(attacking_skill()).url,
                    previous_services=["annotators"],
                    response_formatter=f"{F}:skill_with_attributes",
                ),
            },
            "response_selector": {
                "connector": {
                    "protocol": "python",
                    "class_name": "ConfidenceResponseSelectorConnector",
                },
                "previous_services": ["skills"],
                "state_manager_method": "add_bot_utterance",
            },
        }
    }


def user(client: httpx.Client) -> dict[str, Any]:
    response = client.get("/api/user/alice", params={"view": "chorus"})
    assert response.status_code == 200, response.text
    human: dict[str, Any] = response.json()[-1]["human"]
    return human


def test_a_wrong_typed_profile_field_is_refused_and_the_rest_kept(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services))
    say(client, "I live in London")
    assert user(client)["profile"]["location"] == "London"

    reply = say(client, "attack")
    assert reply["active_skill"] == "attacker" and reply["response"] == "on it"
    stored = dialog_of(client, reply)["utterances"][-2]
    refused = sorted((e["service"], e["message"].split(":")[0]) for e in stored["errors"])
    assert refused == [
        ("annotators.profiler", "profile field 'birthdate' not merged"),
        ("annotators.profiler", "profile field 'gender' not merged"),
        ("annotators.profiler", "profile field 'location' not merged"),
        ("annotators.profiler", "profile field 'name' not merged"),
        ("annotators.profiler", "profile field 'timezone' not merged"),
        ("response_selector", "profile field 'location' not merged"),
    ]
    assert all(e["kind"] == "refused" for e in stored["errors"])
    assert "expected str | None, got an object" in str(stored["errors"])

    assert say(client, "and now?")["active_skill"] == "attacker"
    human = user(client)
    assert human["profile"]["location"] == "London" and human["profile"]["name"] == "Ann"
    assert human["profile"]["occupation"] == "pilot" and human["profile"]["timezone"] is None
    assert human["attributes"]["mood"] == "good" and human["attributes"]["seen_attack"] is True
