"""dp-agent's HTTP API as its clients and Dream's tools (``utils/dumper``) read it: the
dialog list, dp-agent's dialog view and ids, ratings in its form, any printable user id
and ``/debug/current_load``."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from agent.state.storage_limits import StorageLimits
from skills.fallback.app import app as fallback_app
from tests.conftest import AgentFactory, service_entry

DUMPER_DATE = "%Y-%m-%d %H:%M:%S.%f"  # how Dream's utils/dumper parses date_finish
USER_PROFILE = {
    "name",
    "gender",
    "birthdate",
    "location",
    "home_coordinates",
    "work_coordinates",
    "occupation",
    "income_per_year",
}


def start(services: Any, agent: AgentFactory, **settings: Any) -> httpx.Client:
    pipeline = {"services": {"skills": {"fallback": service_entry(services(fallback_app).url)}}}
    return agent(pipeline, **settings)


def say(client: httpx.Client, user: Any, text: str = "hi") -> dict[str, Any]:
    response = client.post("/", json={"user_id": user, "payload": text})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def all_ids(client: httpx.Client, query: str) -> list[str]:
    """What the dumper's ``get_ids`` does: follow ``next`` to the last page."""
    body = client.get(f"/api/dialogs/{query}").json()
    assert set(body) == {"dialog_ids", "next"}
    ids: list[str] = body["dialog_ids"]
    return ids + all_ids(client, body["next"]) if body["next"] is not None else ids


def test_the_dialog_list_pages_as_dp_agent_and_the_dumper_read_it(
    services: Any, agent: AgentFactory
) -> None:
    client = start(services, agent)
    first = say(client, "ann")["dialog_id"]
    say(client, "ann", "/close")
    second = say(client, "ann")["dialog_id"]
    third = say(client, "bob")["dialog_id"]
    page = client.get("/api/dialogs/", params={"limit": 2}).json()
    assert page == {"dialog_ids": [first, second], "next": "?offset=2&limit=2"}
    assert all_ids(client, "?limit=1") == [first, second, third]
    assert all_ids(client, "") == [first, second, third]
    assert all_ids(client, "?_active=1&limit=1") == [second, third]
    assert client.get("/api/dialogs/?_active=0").json() == {"dialog_ids": [first], "next": None}
    for bad in ("offset=-1", f"offset={2**64}", "limit=0", "limit=abc", "_active=2"):
        assert client.get(f"/api/dialogs/?{bad}").status_code == 422
    assert client.get(f"/api/dialogs/?offset={2**62}").json() == {"dialog_ids": [], "next": None}


def test_the_dp_agent_dialect_has_dp_agent_fields_dates_and_ids(
    services: Any, agent: AgentFactory
) -> None:
    client = start(services, agent, dialect="dp-agent")
    reply = say(client, "ann")
    say(client, "ann", "again")
    dialog = client.get(f"/api/dialogs/{reply['dialog_id']}").json()
    assert dialog["dialog_id"] == reply["dialog_id"]
    assert re.fullmatch(r"[0-9a-f]{24}", dialog["_id"])
    assert dialog["_active"] == "True"
    finish = datetime.strptime(dialog["date_finish"], DUMPER_DATE)  # set while it is open
    assert datetime.strptime(dialog["date_start"], DUMPER_DATE) <= finish
    assert [u["user"]["user_type"] for u in dialog["utterances"]] == ["human", "bot"] * 2
    assert dialog["human_utterances"] == dialog["utterances"][0::2]
    assert dialog["bot_utterances"] == dialog["utterances"][1::2]
    assert dialog["utterances"][-1]["date_time"] == dialog["date_finish"]
    assert set(dialog["human"]["profile"]) >= USER_PROFILE
    assert dialog["human"]["user_external_id"] == "ann"
    assert re.fullmatch(r"[0-9a-f]{24}", dialog["human"]["id"])
    assert dialog["attributes"]["pipeline"]
    assert "speaker" not in dialog["utterances"][0]  # Chorus's own fields stay in its view
    by_object_id = client.get(f"/api/dialogs/{dialog['_id']}").json()
    assert by_object_id == dialog
    assert client.get(f"/api/dialogs/{'0' * 24}").status_code == 404
    say(client, "ann", "/close")
    closed = client.get(f"/api/dialogs/{dialog['_id']}").json()
    assert closed["_active"] == "False"
    (listed,) = client.get("/api/user/ann").json()
    assert listed["_id"] == dialog["_id"]
    assert client.get("/api/user/nobody").json() == []  # dp-agent answers no dialogs


def test_chorus_keeps_its_own_view_unless_asked(services: Any, agent: AgentFactory) -> None:
    client = start(services, agent)
    reply = say(client, "ann")
    path = f"/api/dialogs/{reply['dialog_id']}"
    own = client.get(path).json()
    assert own["utterances"][0]["speaker"] == "human"
    assert datetime.fromisoformat(own["date_start"]).tzinfo is not None
    assert own["date_finish"] is None
    dp_agent = client.get(path, params={"view": "dp-agent"}).json()
    assert dp_agent["_active"] == "True"
    assert client.get(f"/api/dialogs/{dp_agent['_id']}").json() == own
    assert client.get(path, params={"view": "other"}).status_code == 422
    assert client.get("/api/user/nobody").status_code == 404


def test_ratings_are_taken_and_stored_in_dp_agent_form(services: Any, agent: AgentFactory) -> None:
    client = start(services, agent)
    reply = say(client, "ann")
    dialog_id, utt_id = reply["dialog_id"], reply["utt_id"]

    def rate(route: str, **body: Any) -> int:
        return client.post(f"/rating/{route}", json=body).status_code

    assert rate("dialog", dialog_id=dialog_id, rating="good") == 200  # no user_id
    assert rate("dialog", user_id="ann", dialog_id=dialog_id, rating=5) == 200
    assert rate("utterance", user_id="ann", utt_id=utt_id, rating="like") == 200
    assert rate("utterance", utt_id=utt_id, rating=2) == 200
    dialog = client.get(f"/api/dialogs/{dialog_id}").json()
    ratings = dialog["attributes"]["ratings"]
    assert [(r["rating"], r["user_external_id"]) for r in ratings] == [("good", None), (5, "ann")]
    for rating in ratings:
        datetime.strptime(rating["datetime"], DUMPER_DATE)
    assert dialog["rating"] == 5  # the user's own number is Chorus's rating too
    bot = dialog["utterances"][1]
    assert [(r["rating"], r["user_external_id"]) for r in bot["attributes"]["ratings"]] == [
        ("like", "ann"),
        (2, None),
    ]
    assert bot["rating"] is None  # a number without the user's id is only appended
    dp_agent = client.get(f"/api/dialogs/{dialog_id}?view=dp-agent").json()
    assert dp_agent["attributes"]["ratings"] == ratings
    assert rate("dialog", dialog_id=dp_agent["_id"], rating={"stars": 4}) == 200
    assert rate("dialog", user_id="eve", dialog_id=dialog_id, rating="bad") == 404
    assert rate("utterance", user_id="eve", utt_id=utt_id, rating="bad") == 404
    assert rate("dialog", dialog_id="f" * 32, rating=1) == 404
    assert rate("utterance", utt_id="nope", rating=1) == 404
    assert rate("dialog", dialog_id=dialog_id) == 422
    after = client.get(f"/api/dialogs/{dialog_id}").json()
    assert [r["rating"] for r in after["attributes"]["ratings"]] == ["good", 5, {"stars": 4}]
    assert len(after["utterances"][1]["attributes"]["ratings"]) == 2


def test_ratings_are_bounded_in_size_and_number(services: Any, agent: AgentFactory) -> None:
    client = start(services, agent, limits=StorageLimits(max_rating_bytes=64, max_ratings=3))
    reply = say(client, "ann")
    dialog_id, utt_id = reply["dialog_id"], reply["utt_id"]
    big = {"comment": "x" * 100}
    for route, target in (("dialog", {"dialog_id": dialog_id}), ("utterance", {"utt_id": utt_id})):
        refused = client.post(f"/rating/{route}", json={**target, "rating": big})
        assert refused.status_code == 422
        assert "the limit is 64 (MAX_RATING_BYTES)" in refused.json()["message"]
        for number in range(3):
            body = {**target, "rating": number}
            assert client.post(f"/rating/{route}", json=body).status_code == 200
        full = client.post(f"/rating/{route}", json={**target, "rating": 9, "user_id": "ann"})
        assert full.status_code == 409
        assert "already holds 3 ratings" in full.json()["message"]
        assert "MAX_RATINGS" in full.json()["message"]
        # Another user's dialog, or none, is still a 404: the bound tells no ids apart.
        eve = client.post(f"/rating/{route}", json={**target, "rating": 1, "user_id": "eve"})
        assert eve.status_code == 404
        missing = {"dialog_id": "f" * 32} if route == "dialog" else {"utt_id": "nope"}
        assert client.post(f"/rating/{route}", json={**missing, "rating": 1}).status_code == 404
    dialog = client.get(f"/api/dialogs/{dialog_id}").json()
    assert [r["rating"] for r in dialog["attributes"]["ratings"]] == [0, 1, 2]
    assert [r["rating"] for r in dialog["utterances"][1]["attributes"]["ratings"]] == [0, 1, 2]
    assert dialog["rating"] is None  # the refused 9 was not taken as Chorus's rating either
    say(client, "ann", "/close")  # closing keeps them (on MongoDB they move with the dialog)
    closed = client.get(f"/api/dialogs/{dialog_id}").json()
    assert [r["rating"] for r in closed["attributes"]["ratings"]] == [0, 1, 2]
    assert (
        client.post("/rating/dialog", json={"dialog_id": dialog_id, "rating": 3}).status_code == 409
    )


def test_any_printable_user_id_works_on_every_route(services: Any, agent: AgentFactory) -> None:
    client = start(services, agent)
    for user in ("user 1", "a/b", "x+tag@example.org", "ü" * 129, "../..", 42):
        reply = say(client, user)
        path = f"/api/user/{quote(str(user), safe='')}"
        (dialog,) = client.get(path).json()
        assert dialog["dialog_id"] == reply["dialog_id"]
        assert dialog["human"]["user_external_id"] == str(user)
        assert (
            client.post(
                "/rating/dialog",
                json={"user_id": user, "dialog_id": reply["dialog_id"], "rating": 3},
            ).status_code
            == 200
        )
        assert client.get(path).json()[0]["rating"] == 3
        assert client.delete(path).status_code == 204
        assert client.get(path).status_code == 404
    assert say(client, "ann")["user_id"] == "ann"
    assert client.get("/api/user/a").status_code == 404  # "a/b" is gone, "a" never was
    refused = client.post("/", json={"user_id": "tab\there", "payload": "hi"})
    assert refused.status_code == 422


def test_the_user_id_limit_holds_on_every_endpoint(services: Any, agent: AgentFactory) -> None:
    client = start(services, agent, limits=StorageLimits(max_user_id_length=8))
    say(client, "12345678")
    for response in (
        client.post("/", json={"user_id": "123456789", "payload": "hi"}),
        client.post("/api/v1/chat", json={"user_id": "123456789", "text": "hi"}),
        client.get("/api/user/123456789"),
        client.post("/rating/dialog", json={"user_id": "123456789", "dialog_id": "a", "rating": 1}),
    ):
        assert response.status_code == 422
        assert "the limit is 8 (MAX_USER_ID_LENGTH)" in response.text


def test_current_load_answers_as_dp_agent(services: Any, agent: AgentFactory) -> None:
    client = start(services, agent)
    say(client, "ann")
    page = client.get("/debug/current_load")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    load = client.get("/debug/current_load", headers={"Accept": "application/json"}).json()
    assert load["current_load"] == {"agent": 0}
    assert load["response_time"]["agent"] > 0
    assert len(load["response_time"]) == 2 and all(v > 0 for v in load["response_time"].values())
    assert client.get("/debug/current_load?format=json").json()["current_load"] == {"agent": 0}


def ws_url(client: httpx.Client) -> str:
    return str(client.base_url).replace("http://", "ws://").rstrip("/") + "/debug/current_load/ws"


@pytest.mark.served  # a WebSocket
def test_the_current_load_websocket_sends_dp_agents_messages(
    services: Any, agent: AgentFactory
) -> None:
    client = start(services, agent)
    say(client, "ann")
    with ws_connect(ws_url(client), open_timeout=10) as socket:
        # a message now and then every half second, as dp-agent's WSstatsHandler sends them
        for _ in range(2):
            load = json.loads(socket.recv(timeout=10))
            assert set(load) == {"current_load", "response_time"}
            assert load["current_load"] == {"agent": 0}
            assert load["response_time"]["agent"] > 0
            assert len(load["response_time"]) == 2
    # the client left: the agent goes on serving
    assert client.get("/debug/current_load?format=json").status_code == 200


@pytest.mark.store_agnostic
@pytest.mark.served  # a WebSocket
def test_the_current_load_websocket_needs_the_readers_key(
    services: Any, agent: AgentFactory
) -> None:
    client = start(services, agent, api_key="s3cret-key-for-readers")
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(ws_url(client), open_timeout=10)
    assert refused.value.response.status_code == 403
    headers = {"X-API-Key": "s3cret-key-for-readers"}
    with ws_connect(ws_url(client), additional_headers=headers, open_timeout=10) as socket:
        assert json.loads(socket.recv(timeout=10))["current_load"] == {"agent": 0}


def test_closing_commands_answer_an_empty_object_when_asked_to(
    services: Any, agent: AgentFactory
) -> None:
    client = start(services, agent, dialect="dp-agent")
    first = say(client, "ann")["dialog_id"]
    for command in ("/close", "/start"):
        response = client.post("/", json={"user_id": "ann", "payload": command})
        assert response.status_code == 200 and response.json() == {}
    second = say(client, "ann")["dialog_id"]
    assert second != first  # the command closed the open dialog, as on dp-agent
    assert client.get(f"/api/dialogs/{first}").json()["date_finish"] is not None
    # Chorus's own reply by default
    chorus = start(services, agent)
    closed = chorus.post("/", json={"user_id": "bob", "payload": "/close"}).json()
    assert closed["utt_id"] is None and "closed" in closed["response"]
