"""Bad input gets a 4xx that says what to fix; ratings, ping and docs work as dp-agent's."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from skills.greeting.app import app as greeting_app
from tests.conftest import AgentFactory, service_entry


@pytest.fixture
def client(services: Any, agent: AgentFactory) -> httpx.Client:
    return agent(
        {"services": {"skills": {"greeting": service_entry(services(greeting_app).url)}}},
        max_text_length=50,
    )


def test_ping_and_openapi(client: httpx.Client) -> None:
    assert client.get("/ping").json() == "pong"
    assert client.get("/docs").status_code == 200
    schema = client.get("/openapi.json").json()
    assert {
        "/",
        "/api/dialogs/{dialog_id}",
        "/api/user/{user_id}",
        "/rating/dialog",
        "/rating/utterance",
        "/ping",
    } <= set(schema["paths"])
    assert "HumanUtterance" in schema["components"]["schemas"]


def test_missing_user_id_is_named(client: httpx.Client) -> None:
    response = client.post("/", json={"payload": "hi"})
    assert response.status_code == 422
    assert response.json()["message"] == "user_id: Field required"


def test_a_query_object_as_user_id_is_refused(client: httpx.Client) -> None:
    response = client.post("/", json={"user_id": {"$ne": None}, "payload": "hi"})
    assert response.status_code == 422
    assert "user_id" in response.json()["message"]


def test_numeric_user_ids_are_accepted_as_dp_agent_clients_send_them(
    client: httpx.Client,
) -> None:
    """dp-agent answers a numeric user_id with a number; it is the same user as "12345"."""
    numeric = client.post("/", json={"user_id": 12345, "payload": "hi"}).json()
    assert numeric["user_id"] == 12345
    text = client.post("/", json={"user_id": "12345", "payload": "hi"}).json()
    assert text["user_id"] == "12345"
    assert text["dialog_id"] == numeric["dialog_id"]


def test_wrong_content_type_says_how_to_send(client: httpx.Client) -> None:
    response = client.post(
        "/",
        content="user_id=a&payload=hi",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 415
    assert "Content-Type: application/json" in response.json()["detail"]


def test_malformed_json_is_a_422(client: httpx.Client) -> None:
    response = client.post(
        "/", content=b'{"user_id": ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert "JSON decode error" in response.json()["message"]


def test_too_long_and_empty_payloads(client: httpx.Client) -> None:
    long = client.post("/", json={"user_id": "a", "payload": "x" * 51})
    assert long.status_code == 422
    assert "limit is 50" in long.json()["detail"]
    empty = client.post("/", json={"user_id": "a", "payload": ""})
    assert empty.status_code == 422
    assert empty.json()["message"].startswith("payload: String should have at least 1")


def test_extra_keys_that_would_be_field_paths_are_refused(client: httpx.Client) -> None:
    response = client.post("/", json={"user_id": "a", "payload": "hi", "a.b": 1})
    assert response.status_code == 422
    assert "'a.b' is not allowed" in response.json()["detail"]


def test_unknown_dialog_and_user_are_404(client: httpx.Client) -> None:
    missing = client.get("/api/dialogs/0123456789abcdef")
    assert missing.status_code == 404
    assert missing.json()["detail"] == "no dialog with id '0123456789abcdef'"
    assert client.get("/api/user/nobody").status_code == 404
    assert client.get("/api/dialogs/bad%20id").status_code == 422


def test_ratings(client: httpx.Client) -> None:
    reply = client.post("/", json={"user_id": "rater", "payload": "hello"}).json()
    ok = client.post(
        "/rating/dialog", json={"user_id": "rater", "dialog_id": reply["dialog_id"], "rating": 5}
    )
    assert ok.json() == {"status": "ok"}
    client.post(
        "/rating/utterance", json={"user_id": "rater", "utt_id": reply["utt_id"], "rating": 1}
    ).raise_for_status()
    dialog = client.get(f"/api/dialogs/{reply['dialog_id']}").json()
    assert dialog["rating"] == 5
    assert dialog["utterances"][1]["rating"] == 1
    stranger = client.post(
        "/rating/dialog", json={"user_id": "someone", "rating": 1, "dialog_id": reply["dialog_id"]}
    )
    assert stranger.status_code == 404
    human_utt = dialog["utterances"][0]["utt_id"]
    not_bot = client.post(
        "/rating/utterance", json={"user_id": "rater", "utt_id": human_utt, "rating": 1}
    )
    assert not_bot.status_code == 404
