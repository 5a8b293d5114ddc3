"""Bad input gets a 4xx that says what to fix; ratings, ping and docs work as dp-agent's."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from skills.greeting.app import app as greeting_app
from tests.conftest import AgentFactory, service_entry


def pipeline(services: Any) -> dict[str, Any]:
    return {"services": {"skills": {"greeting": service_entry(services(greeting_app).url)}}}


@pytest.fixture
def client(services: Any, agent: AgentFactory) -> httpx.Client:
    return agent(pipeline(services), max_text_length=50)


@pytest.fixture(scope="module")
def shared_client(shared_services: Any, shared_agent: AgentFactory) -> httpx.Client:
    """The same agent, shared by the tests of requests refused (or answered) before the
    store."""
    return shared_agent(pipeline(shared_services), max_text_length=50)


@pytest.mark.store_agnostic
def test_ping_and_openapi(shared_client: httpx.Client) -> None:
    assert shared_client.get("/ping").json() == "pong"
    assert shared_client.get("/docs").status_code == 200
    schema = shared_client.get("/openapi.json").json()
    assert {
        "/",
        "/api/dialogs/{dialog_id}",
        "/api/user/{user_id}",
        "/rating/dialog",
        "/rating/utterance",
        "/ping",
    } <= set(schema["paths"])
    assert "HumanUtterance" in schema["components"]["schemas"]


@pytest.mark.store_agnostic
def test_missing_user_id_is_named(shared_client: httpx.Client) -> None:
    response = shared_client.post("/", json={"payload": "hi"})
    assert response.status_code == 422
    assert response.json()["message"] == "user_id: Field required"


@pytest.mark.store_agnostic
def test_a_query_object_as_user_id_is_refused(shared_client: httpx.Client) -> None:
    response = shared_client.post("/", json={"user_id": {"$ne": None}, "payload": "hi"})
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


@pytest.mark.store_agnostic
def test_wrong_content_type_says_how_to_send(shared_client: httpx.Client) -> None:
    response = shared_client.post(
        "/",
        content="user_id=a&payload=hi",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 415
    assert "Content-Type: application/json" in response.json()["message"]


@pytest.mark.store_agnostic
def test_malformed_json_is_a_422(shared_client: httpx.Client) -> None:
    response = shared_client.post(
        "/", content=b'{"user_id": ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert "JSON decode error" in response.json()["message"]


@pytest.mark.store_agnostic
def test_too_long_payloads(shared_client: httpx.Client) -> None:
    # an empty one is a message (an image without a caption): tests/dream/test_dream_clients.py
    long = shared_client.post("/", json={"user_id": "a", "payload": "x" * 51})
    assert long.status_code == 422
    assert "limit is 50" in long.json()["message"]


@pytest.mark.store_agnostic
def test_extra_keys_that_would_be_field_paths_are_refused(shared_client: httpx.Client) -> None:
    response = shared_client.post("/", json={"user_id": "a", "payload": "hi", "a.b": 1})
    assert response.status_code == 422
    assert "'a.b' is not allowed" in response.json()["message"]


def test_unknown_dialog_and_user_are_404(client: httpx.Client) -> None:
    missing = client.get("/api/dialogs/0123456789abcdef")
    assert missing.status_code == 404
    assert missing.json()["message"] == "no dialog with id '0123456789abcdef'"
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


def test_every_error_has_one_envelope(services: Any, agent: AgentFactory) -> None:
    """Whatever refuses a request (the schema, a length check, the idempotency keys, the
    routing, the body limit, the key guard) the body is {error, message, fields}."""
    client = agent(
        {"services": {"skills": {"greeting": service_entry(services(greeting_app).url)}}},
        max_text_length=50,
        max_body_bytes=2048,
        api_key="0123456789abcdef0123",
    )
    assert client.post("/", json={"user_id": "a", "payload": "hi", "message_id": "k1"}).is_success
    errors = {
        "schema": client.post("/", json={"payload": "hi"}),
        "length": client.post("/", json={"user_id": "a", "payload": "x" * 51}),
        "key reused": client.post(
            "/", json={"user_id": "a", "payload": "another", "message_id": "k1"}
        ),
        "not found": client.get("/nowhere"),
        "method": client.put("/ping"),
        "content type": client.post("/", content=b"x", headers={"content-type": "text/plain"}),
        "too large": client.post("/", json={"user_id": "a", "payload": "x" * 4096}),
        "no key": client.get("/api/dialogs/0123456789abcdef"),
        "wrong key": client.get("/api/dialogs/0123456789abcdef", headers={"X-API-Key": "x"}),
    }
    statuses = {name: response.status_code for name, response in errors.items()}
    assert statuses == {
        "schema": 422,
        "length": 422,
        "key reused": 422,
        "not found": 404,
        "method": 405,
        "content type": 415,
        "too large": 413,
        "no key": 401,
        "wrong key": 403,
    }
    for name, response in errors.items():
        body = response.json()
        assert set(body) == {"error", "message", "fields"}, name
        assert isinstance(body["message"], str) and body["message"], name
        assert isinstance(body["fields"], list), name
    assert errors["schema"].json() == {
        "error": "invalid_request",
        "message": "user_id: Field required",
        "fields": [{"loc": ["body", "user_id"], "msg": "Field required", "type": "missing"}],
    }
    assert errors["length"].json()["error"] == "invalid_request"
    assert errors["not found"].json()["error"] == "not_found"
    assert errors["no key"].headers["www-authenticate"] == "APIKey"
    reused = errors["key reused"].json()["message"]
    assert reused == (
        "idempotency key 'k1' was already used for a different message; "
        "send a new key with each new message"
    )
    assert "chat:" not in reused and "message id" not in reused


@pytest.mark.store_agnostic
def test_the_schema_documents_the_error_envelope(shared_client: httpx.Client) -> None:
    schema = shared_client.get("/openapi.json").json()
    chat = schema["paths"]["/"]["post"]["responses"]
    assert "422" not in chat  # FastAPI's own 422 shape is not what the agent sends
    assert chat["4XX"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    assert set(schema["components"]["schemas"]["ErrorBody"]["properties"]) == {
        "error",
        "message",
        "fields",
    }


@pytest.mark.store_agnostic
def test_post_root_is_described_and_checked_as_before(shared_client: httpx.Client) -> None:
    """``POST /`` answers plain requests on its own path: FastAPI still describes the
    route and answers what it refuses."""
    operation = shared_client.get("/openapi.json").json()["paths"]["/"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/AgentMessage"}
    assert {p["name"] for p in operation["parameters"]} == {
        "Idempotency-Key",
        "double_texting",
    }
    wrong = shared_client.post("/?double_texting=sometimes", json={"user_id": "u", "payload": "hi"})
    assert wrong.status_code == 422
    assert "double_texting" in wrong.text
    not_json = shared_client.post(
        "/", content=b'{"user_id": "u", "payload": "hi"}', headers={"content-type": "text/plain"}
    )
    assert not_json.status_code == 415
