"""``/chat/ws``: dp-agent's chat protocol over a real WebSocket against the agent with real
services, and the turn's events for clients that ask for them (both stores)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.api.test_turn_events import PIECES, comparable, pipeline, streaming_pipeline
from tests.conftest import AgentFactory

# WebSockets need a served agent (httpx.ASGITransport speaks HTTP only).
pytestmark = pytest.mark.served


def socket(client: httpx.Client, query: str = "", **headers: str) -> ClientConnection:
    url = str(client.base_url).replace("http://", "ws://").rstrip("/")
    return connect(f"{url}/chat/ws{query}", additional_headers=headers, open_timeout=10)


def ask(ws: ClientConnection, message: dict[str, Any] | str) -> Any:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.recv(timeout=30))


def turn_frames(ws: ClientConnection, message: dict[str, Any]) -> list[dict[str, Any]]:
    """Every frame of one turn, up to its answer or error."""
    ws.send(json.dumps(message))
    frames = [json.loads(ws.recv(timeout=30))]
    while frames[-1]["event"] not in ("answer", "error"):
        frames.append(json.loads(ws.recv(timeout=30)))
    return frames


def test_dp_agents_protocol_answers_each_message_as_post_does(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services))
    plain = client.post("/", json={"user_id": "ann", "payload": "Hello!"}).json()
    with socket(client) as ws:
        reply = ask(ws, {"user_id": "bob", "payload": "Hello!"})
        assert set(reply) == set(plain)
        assert (reply["response"], reply["active_skill"], reply["user_id"]) == (
            plain["response"],
            plain["active_skill"],
            "bob",
        )
        refused = ask(ws, {"user_id": "bob"})  # no payload: the same 422 as POST /
        assert refused["status"] == 422 and "payload" in refused["message"]
        assert ask(ws, "not json")["status"] == 400
        assert ask(ws, {"user_id": "bob", "payload": "/start"}) == "command_performed"
        again = ask(ws, {"user_id": "bob", "payload": "Hello!"})
        assert again["dialog_id"] != reply["dialog_id"]  # /start closed the first dialog
    dialog = client.get(f"/api/dialogs/{reply['dialog_id']}").json()
    assert [u["text"] for u in dialog["utterances"]] == ["Hello!", reply["response"]]


def test_events_stream_a_chosen_skills_tokens_and_store_the_turn_as_json_does(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(streaming_pipeline(services, "story"))
    json_reply = client.post("/", json={"user_id": "ann", "payload": "Tell me a story"}).json()
    with socket(client, "?events=true") as ws:
        frames = turn_frames(ws, {"user_id": "bob", "payload": "Tell me a story"})
        order = [f["event"] for f in frames]
        assert order[0] == "accepted" and order[-1] == "answer"
        assert [f["data"]["text"] for f in frames if f["event"] == "token"] == PIECES
        story_done = next(
            i
            for i, f in enumerate(frames)
            if f["event"] == "progress" and f["data"]["service"] == "story"
        )
        assert max(i for i, kind in enumerate(order) if kind == "token") < story_done
        refused = turn_frames(ws, {"user_id": "", "payload": "hi"})
        assert refused == [{"event": "error", "data": refused[0]["data"]}]
        assert refused[0]["data"]["status"] == 422
    answer = frames[-1]["data"]
    assert set(answer) == set(json_reply)
    assert answer["response"] == json_reply["response"] == "".join(PIECES)
    streamed = client.get(f"/api/dialogs/{answer['dialog_id']}").json()
    plain = client.get(f"/api/dialogs/{json_reply['dialog_id']}").json()
    assert comparable(streamed) == comparable(plain)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_protected_chat_needs_the_key_on_the_socket_too(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services), api_key="s3cret-key-for-tests", protect_chat=True)
    with pytest.raises(InvalidStatus) as refused:
        socket(client)
    assert refused.value.response.status_code == 403
    with socket(client, "?api_key=s3cret-key-for-tests") as ws:
        assert ask(ws, {"user_id": "bob", "payload": "Hello!"})["active_skill"] == "greeting"
    with socket(client, **{"X-API-Key": "s3cret-key-for-tests"}) as ws:
        assert ask(ws, {"user_id": "bob", "payload": "Hello!"})["user_id"] == "bob"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_binary_frame_or_json_nested_too_deep_is_refused_as_over_http(
    services: Any, agent: AgentFactory
) -> None:
    """A binary frame gets the error that says to send text, and the socket stays open;
    JSON nested 100,000 deep gets the 422 the same body gets over HTTP."""
    client = agent(pipeline(services))
    deep = '{"user_id": "bob", "payload": "Hello!", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}"
    over_http = client.post("/", content=deep, headers={"Content-Type": "application/json"})
    with socket(client) as ws:
        ws.send(json.dumps({"user_id": "bob", "payload": "Hello!"}).encode())
        binary = json.loads(ws.recv(timeout=30))
        too_deep = ask(ws, deep)
        assert ask(ws, {"user_id": "bob", "payload": "Hello!"})["user_id"] == "bob"
    assert binary == {
        "status": 400,
        "error": "bad_request",
        "message": 'send each message as a text frame holding a JSON object {"user_id": ..., '
        '"payload": ...}: binary frames are not read',
        "fields": [],
    }
    assert over_http.status_code == 422
    assert too_deep == {"status": 422, **over_http.json()}
    assert too_deep["message"] == "body: nested more than 32 levels deep (MAX_JSON_DEPTH)"
