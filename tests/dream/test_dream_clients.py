"""What Dream's clients get from a dp-agent pipeline file with no settings added: dp-agent's
reply (with the bot utterance's ``attributes``, no ``debug_output`` unless asked), its dialog
view, its ``{}`` to ``/start``, and an answer to an empty message, as Dream's own
``test_workflow_bug`` and dp-agent's Telegram channel (a photo without a caption) send it.
Through the agent over HTTP."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tests.api.test_chat_ws import ask, socket
from tests.conftest import AgentFactory
from tests.dream import services as dream
from tests.dream.services import Recorder
from tests.dream.test_dream_behaviour import LAST_CHANCE
from tests.dream.test_dream_pipeline import F, http

#: The date format Dream's ``utils/dumper`` parses ``date_finish`` with.
DUMPER_DATE = "%Y-%m-%d %H:%M:%S.%f"


def pipeline(url: str) -> dict[str, Any]:
    return {
        "services": {
            "last_chance_service": LAST_CHANCE,
            "skills": {
                "describer": {
                    "connector": http(url),
                    "dialog_formatter": f"{F}:text_and_image",
                    "response_formatter": f"{F}:skill_pair",
                    "state_manager_method": "add_hypothesis",
                }
            },
            "response_selectors": {
                "confidence": {
                    "connector": {
                        "protocol": "python",
                        "class_name": "ConfidenceResponseSelectorConnector",
                    },
                    "previous_services": ["skills"],
                    "state_manager_method": "add_bot_utterance",
                }
            },
        }
    }


def test_an_empty_message_is_answered_as_dp_agent_answers_it(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services(dream.describer()).url))
    # Dream's tests/test_workflow_bug_and_asr.py::test_workflow_bug, message by message
    for message in (
        {"user_id": "test", "payload": "yes", "speech": {}},
        {"user_id": "test", "payload": ""},
        {"user_id": "test", "payload": "yes"},
    ):
        response = client.post("/", json=message)
        assert response.status_code == 200, response.text
        assert "response" in response.json()
    dialog = client.get(f"/api/dialogs/{response.json()['dialog_id']}").json()
    assert [u["text"] for u in dialog["human_utterances"]] == ["yes", "", "yes"]
    assert dialog["bot_utterances"][1]["text"] == "text '', image None"


@pytest.mark.served  # a WebSocket too
def test_a_body_without_payload_is_an_empty_message_as_on_dp_agent(
    services: Any, agent: AgentFactory
) -> None:
    """dp-agent's handler reads ``payload`` with ``""`` as its default: a client that
    sends only attachments (or nothing) is answered, over HTTP and the WebSocket alike,
    and the WebSocket's frame is ``POST /``'s, without Chorus's ``debug_output``."""
    client = agent(pipeline(services(dream.describer()).url))
    response = client.post("/", json={"user_id": "quiet"})
    assert response.status_code == 200, response.text
    plain = response.json()
    dialog = client.get(f"/api/dialogs/{plain['dialog_id']}").json()
    assert dialog["human_utterances"][-1]["text"] == ""
    with socket(client) as ws:
        framed = ask(ws, {"user_id": "quiet"})
    assert set(framed) == set(plain) and "debug_output" not in framed
    assert framed["dialog_id"] == plain["dialog_id"]
    chorus = agent(pipeline(services(dream.describer()).url), dialect="chorus")
    refused = chorus.post("/", json={"user_id": "quiet"})
    assert refused.status_code == 422 and refused.json()["message"] == "payload: Field required"


def test_an_image_without_a_caption_reaches_the_services(
    services: Any, agent: AgentFactory
) -> None:
    seen = Recorder()
    client = agent(pipeline(services(dream.describer(seen)).url))
    photo = "http://files:3000/file?file=cat.jpg"
    response = client.post("/", json={"user_id": "tg", "payload": "", "image": photo})
    assert response.status_code == 200, response.text
    assert response.json()["response"] == f"text '', image {photo}"
    assert seen.requests == [{"sentences": [""], "image": [photo]}]


def test_the_size_bound_still_holds_for_text(services: Any, agent: AgentFactory) -> None:
    client = agent(pipeline(services(dream.describer()).url), max_text_length=10)
    response = client.post("/", json={"user_id": "u", "payload": "x" * 11})
    assert response.status_code == 422
    assert "CHORUS_MAX_TEXT_LENGTH" in response.text


def test_the_reply_is_dp_agents_with_the_bot_utterances_attributes(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(
        {
            "services": {
                "skills": {
                    "counter": {
                        "connector": http(services(dream.counter()).url),
                        "dialog_formatter": f"{F}:dff_like",
                        "response_formatter": f"{F}:skill_with_attributes",
                        "state_manager_method": "add_hypothesis",
                    }
                },
                "response_selectors": {
                    "rs": {
                        "connector": http(services(dream.response_selector(extra=3)).url),
                        "dialog_formatter": f"{F}:full_dialog",
                        "previous_services": ["skills"],
                        "state_manager_method": "add_bot_utterance",
                    }
                },
            }
        }
    )
    reply = client.post("/", json={"user_id": "alice", "payload": "hello"}).json()
    assert set(reply) == {
        "dialog_id",
        "utt_id",
        "user_id",
        "response",
        "active_skill",
        "attributes",
    }
    assert reply["attributes"] == {"chosen_by": "test selector"}
    # the dp-agent view by default: what dp-agent's clients and Dream's dumper read
    dialog = client.get(f"/api/dialogs/{reply['dialog_id']}").json()
    assert dialog["bot_utterances"][-1]["attributes"] == reply["attributes"]
    assert dialog["bot_utterances"][-1]["utt_id"] == reply["utt_id"]
    datetime.strptime(dialog["date_finish"], DUMPER_DATE)  # set while the dialog is open
    assert client.get("/api/user/alice").json()[0]["dialog_id"] == reply["dialog_id"]
    # dp-agent's answer to a closing command
    closed = client.post("/", json={"user_id": "alice", "payload": "/start"})
    assert closed.status_code == 200 and closed.json() == {}
    # a setting still chooses Chorus's shapes
    chorus = client.get(f"/api/dialogs/{reply['dialog_id']}", params={"view": "chorus"}).json()
    assert chorus["utterances"][1]["attributes"] == {"chosen_by": "test selector"}


def test_the_dialect_setting_still_chooses_chorus_shapes_on_a_dp_agent_file(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services(dream.describer()).url), dialect="chorus")
    reply = client.post("/", json={"user_id": "bob", "payload": "hi"}).json()
    dialog = client.get(f"/api/dialogs/{reply['dialog_id']}").json()
    assert "utterances" in dialog and "human_utterances" not in dialog  # Chorus's dialect
    closed = client.post("/", json={"user_id": "bob", "payload": "/close"}).json()
    assert closed["dialog_id"] == reply["dialog_id"] and closed["utt_id"] is None
