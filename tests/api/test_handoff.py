"""Handing a dialog to a person and back (docs/handoff.md), against the real agent and real
services over HTTP and a real WebSocket: the issue's check first (a user
asks for a person on the WebSocket, an operator claims the dialog and answers, the user's
next message is not answered by the bot, and after the handback the bot answers again with
the operator's reply in the history), then each rule of the contract."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from typer.testing import CliRunner
from websockets.sync.client import ClientConnection

from agent.api import composition
from agent.cli.main import app as cli
from annotators.tokens.app import app as tokens_app
from response_selectors.confidence.app import app as confidence_app
from skills.fallback.app import app as fallback_app
from skills.greeting.app import app as greeting_app
from skills.handoff.app import app as handoff_app
from tests.api.test_chat_ws import socket
from tests.conftest import AgentFactory, service_entry
from tests.support.events import events_of
from tests.support.stored import stored_dialogs

OPERATOR_KEY = "operator-key-0123456789"
API_KEY = "reader-key-0123456789"
ANNOUNCE = "A person will take over here in a moment."
TAKEN_BACK = "Nobody came, so I am back."


def pipeline(services: Any, **handoff: Any) -> dict[str, Any]:
    """Greeting, fallback and the shipped handoff skill, and handoffs on."""
    return {
        "services": {
            "annotators": {"tokens": service_entry(services(tokens_app).url)},
            "skills": {
                "handoff": service_entry(services(handoff_app).url),
                "greeting": service_entry(services(greeting_app).url),
                "fallback": service_entry(services(fallback_app).url),
            },
            "response_selectors": {"confidence": service_entry(services(confidence_app).url)},
        },
        "handoff": {"announce": ANNOUNCE, "taken_back": TAKEN_BACK, **handoff},
    }


def operator(client: httpx.Client, name: str = "ann") -> dict[str, str]:
    return {"X-Operator-Key": OPERATOR_KEY, "X-Operator": name}


def frame(ws: ClientConnection) -> Any:
    return json.loads(ws.recv(timeout=30))


def say(ws: ClientConnection, text: str, user_id: str = "alice") -> None:
    ws.send(json.dumps({"user_id": user_id, "payload": text}))


@pytest.mark.served  # a WebSocket to the agent's address
def test_an_operator_takes_over_and_hands_back_on_the_users_websocket(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services), operator_key=OPERATOR_KEY)
    with socket(client) as ws:
        say(ws, "Hello!")
        greeted = frame(ws)
        assert greeted["active_skill"] == "greeting" and "handoff" not in greeted

        say(ws, "I want to talk to a human")
        asked = frame(ws)
        assert asked["response"] == ANNOUNCE
        assert asked["handoff"]["state"] == "waiting"
        dialog_id = asked["dialog_id"]

        inbox = client.get("/api/operator/dialogs", headers=operator(client)).json()
        assert [e["handoff"]["dialog_id"] for e in inbox["dialogs"]] == [dialog_id]
        assert inbox["dialogs"][0]["handoff"]["requested_by"] == "skill:handoff"
        claimed = client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator(client))
        assert claimed.json()["handoff"]["state"] == "held"

        written = client.post(
            f"/api/operator/dialogs/{dialog_id}/messages",
            headers=operator(client),
            json={"text": "Hi, I'm Ann. How can I help?"},
        )
        assert written.status_code == 201
        reached = frame(ws)
        assert (reached["response"], reached["active_skill"], reached["operator"]) == (
            "Hi, I'm Ann. How can I help?",
            "operator",
            "ann",
        )

        # The operator follows the dialog live and sees the user's next message; the bot
        # does not answer it: the next frame the user gets is the operator's.
        with client.stream(
            "GET",
            f"/api/operator/dialogs/{dialog_id}/events",
            params={"after": reached["utt_id"]},
            headers=operator(client),
        ) as live:
            events = events_of(live.iter_lines())
            assert next(events)[1]["state"] == "held"
            say(ws, "Hello! Are you a bot?")
            kind, seen = next(events)
        assert kind == "utterance" and seen["text"] == "Hello! Are you a bot?"
        assert seen["handed_off"] is True
        client.post(
            f"/api/operator/dialogs/{dialog_id}/messages",
            headers=operator(client),
            json={"text": "No, a person. I'll hand you back now."},
        )
        assert frame(ws)["response"] == "No, a person. I'll hand you back now."

        back = client.post(f"/api/operator/dialogs/{dialog_id}/handback", headers=operator(client))
        assert back.json()["handoff"]["state"] == "returned"

        say(ws, "Hello!")
        answered = frame(ws)
        assert answered["active_skill"] == "greeting" and "handoff" not in answered
        assert answered["dialog_id"] == dialog_id

    stored = client.get(f"/api/dialogs/{dialog_id}").json()["utterances"]
    assert [(u["speaker"], u["text"]) for u in stored[2:]] == [
        ("human", "I want to talk to a human"),
        ("bot", ANNOUNCE),
        ("bot", "Hi, I'm Ann. How can I help?"),
        ("human", "Hello! Are you a bot?"),
        ("bot", "No, a person. I'll hand you back now."),
        ("human", "Hello!"),
        ("bot", answered["response"]),
    ]
    kept = stored[5]
    assert kept["handed_off"] is True and kept["hypotheses"] == []
    assert [u.get("operator") for u in stored if u["speaker"] == "bot"][2:4] == ["ann", "ann"]


def test_a_plain_post_client_is_told_a_person_holds_the_dialog_and_polls_the_replies(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services, patterns=["\\bagent please\\b"]), operator_key=OPERATOR_KEY)
    asked = client.post("/", json={"user_id": "bob", "payload": "Agent please!"}).json()
    assert asked["response"] == ANNOUNCE and asked["active_skill"] == "handoff"
    assert asked["handoff"]["state"] == "waiting"
    dialog_id = asked["dialog_id"]
    held = client.post("/", json={"user_id": "bob", "payload": "Hello?"})
    assert held.status_code == 202
    assert held.json()["response"] == "" and held.json()["handoff"]["state"] == "waiting"

    client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator(client, "cy"))
    client.post(
        f"/api/operator/dialogs/{dialog_id}/messages",
        headers=operator(client, "cy"),
        json={"text": "Cy here."},
    )
    replies = client.get(
        f"/api/chat/dialogs/{dialog_id}/replies",
        params={"user_id": "bob", "after": asked["utt_id"]},
    ).json()
    assert [(r["text"], r["operator"]) for r in replies["replies"]] == [("Cy here.", "cy")]
    assert replies["handoff"]["state"] == "held" and replies["handoff"]["operator"] == "cy"
    nothing_new = client.get(
        f"/api/chat/dialogs/{dialog_id}/replies",
        params={"user_id": "bob", "after": replies["last_utt_id"]},
    ).json()
    assert nothing_new["replies"] == []
    other_user = client.get(f"/api/chat/dialogs/{dialog_id}/replies", params={"user_id": "eve"})
    assert other_user.status_code == 404


def test_two_operators_cannot_both_claim_and_only_the_holder_writes(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services), operator_key=OPERATOR_KEY)
    dialog_id = client.post("/", json={"user_id": "dan", "payload": "I need a human"}).json()[
        "dialog_id"
    ]
    first = client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator(client, "ann"))
    second = client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator(client, "bo"))
    assert first.status_code == 200 and second.status_code == 409
    assert "held by ann" in second.json()["message"]
    refused = client.post(
        f"/api/operator/dialogs/{dialog_id}/messages",
        headers=operator(client, "bo"),
        json={"text": "me too"},
    )
    assert refused.status_code == 409


def test_operator_routes_need_the_operator_key_and_never_the_api_key(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services), operator_key=OPERATOR_KEY, api_key=API_KEY)
    dialog_id = client.post("/", json={"user_id": "eve", "payload": "I want a person"}).json()[
        "dialog_id"
    ]
    assert client.get("/api/operator/dialogs").status_code == 401
    as_reader = client.get("/api/operator/dialogs", headers={"X-Operator-Key": API_KEY})
    assert as_reader.status_code == 403
    # A dialog with the bot is not an operator's to read, whatever its id.
    bot_dialog = client.post("/", json={"user_id": "fay", "payload": "Hello!"}).json()["dialog_id"]
    assert (
        client.get(f"/api/operator/dialogs/{bot_dialog}", headers=operator(client)).status_code
        == 404
    )
    assert (
        client.get(f"/api/operator/dialogs/{dialog_id}", headers=operator(client)).status_code
        == 200
    )


@pytest.mark.store_agnostic
def test_without_the_operator_key_the_operator_routes_are_off(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services))
    refused = client.get("/api/operator/dialogs", headers={"X-Operator-Key": OPERATOR_KEY})
    assert refused.status_code == 403 and "CHORUS_OPERATOR_KEY" in refused.json()["message"]


def test_without_the_operator_key_no_dialog_is_handed_off_and_the_api_is_told_why(
    services: Any, agent: AgentFactory
) -> None:
    """Nobody could claim a dialog: the handoff section is off, rather than the bot falling
    silent until unclaimed_after takes the dialog back."""
    client = agent(pipeline(services, patterns=["^hello!$"]), api_key=API_KEY)
    ruled = client.post("/", json={"user_id": "dan", "payload": "Hello!"}).json()
    assert ruled["active_skill"] == "greeting" and "handoff" not in ruled  # no rule applies
    asked = client.post("/", json={"user_id": "dan", "payload": "I want to talk to a human"})
    assert asked.status_code == 200 and "handoff" not in asked.json()
    # The skill's hypothesis asked for a person; with handoffs off its own words answer.
    assert asked.json()["response"].startswith("I can't reach a person from here")

    url = f"/api/dialogs/{ruled['dialog_id']}/handoff"
    refused = client.post(url, json={"reason": "VIP"}, headers={"X-API-Key": API_KEY})
    assert refused.status_code == 409
    assert "set CHORUS_OPERATOR_KEY" in refused.json()["message"], refused.json()
    answered = client.post("/", json={"user_id": "dan", "payload": "Hello!"}).json()
    assert answered["active_skill"] == "greeting" and "handoff" not in answered


@pytest.mark.both_stores
@pytest.mark.served  # a WebSocket to the agent's address
def test_across_two_agents_one_claim_wins_and_every_message_reaches_the_other_side(
    services: Any, agent: AgentFactory
) -> None:
    """The user talks to one agent, the operators to another, on one database: nothing
    but the store connects them."""
    config = pipeline(services)
    user_side = agent(config, operator_key=OPERATOR_KEY)
    operator_side = agent(config, operator_key=OPERATOR_KEY)
    with socket(user_side) as ws:
        say(ws, "Can I speak with a real person?", user_id="gil")
        dialog_id = frame(ws)["dialog_id"]

        def claim(args: tuple[httpx.Client, str]) -> int:
            client, name = args
            url = f"/api/operator/dialogs/{dialog_id}/claim"
            return client.post(url, headers=operator(client, name)).status_code

        with ThreadPoolExecutor(max_workers=2) as pool:
            codes = list(pool.map(claim, [(user_side, "ann"), (operator_side, "bo")]))
        assert sorted(codes) == [200, 409]
        holder = "ann" if codes[0] == 200 else "bo"

        # The same message sent to both agents at once (a retry) is stored once.
        def write(client: httpx.Client) -> dict[str, Any]:
            answer = client.post(
                f"/api/operator/dialogs/{dialog_id}/messages",
                headers=operator(client, holder),
                json={"text": "Hello, a person here.", "message_id": "m-1"},
            )
            assert answer.status_code == 201
            written: dict[str, Any] = answer.json()["utterance"]
            return written

        with ThreadPoolExecutor(max_workers=2) as pool:
            first, second = pool.map(write, [user_side, operator_side])
        assert first["utt_id"] == second["utt_id"]
        reached = frame(ws)
        assert (reached["response"], reached["operator"]) == ("Hello, a person here.", holder)

        with operator_side.stream(
            "GET",
            f"/api/operator/dialogs/{dialog_id}/events",
            params={"after": reached["utt_id"]},
            headers=operator(operator_side),
        ) as live:
            events = events_of(live.iter_lines())
            next(events)
            say(ws, "Thanks! One question.", user_id="gil")
            kind, seen = next(events)
        assert (kind, seen["text"]) == ("utterance", "Thanks! One question.")

        url = f"/api/operator/dialogs/{dialog_id}/handback"
        assert operator_side.post(url, headers=operator(operator_side, holder)).status_code == 200
        say(ws, "Hello!", user_id="gil")
        assert frame(ws)["active_skill"] == "greeting"
    stored = operator_side.get(f"/api/dialogs/{dialog_id}").json()["utterances"]
    assert [u["text"] for u in stored].count("Hello, a person here.") == 1


@pytest.mark.served  # a WebSocket to the agent's address
def test_a_dialog_no_one_claims_is_taken_back_once_and_the_user_told(
    services: Any, agent: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(composition, "UNCLAIMED_POLL", 0.05)
    config = pipeline(services, unclaimed_after=0.2)
    replicas = [agent(config, operator_key=OPERATOR_KEY) for _ in range(2)]
    with socket(replicas[0]) as ws:
        say(ws, "I want to talk to a human", user_id="hal")
        asked = frame(ws)
        assert asked["handoff"]["state"] == "waiting"
        taken_back = frame(ws)
        assert (taken_back["response"], taken_back["active_skill"]) == (TAKEN_BACK, "handoff")
        assert taken_back["handoff"]["state"] == "returned"
        say(ws, "Hello!", user_id="hal")
        assert frame(ws)["active_skill"] == "greeting"
    stored = replicas[1].get(f"/api/dialogs/{asked['dialog_id']}").json()["utterances"]
    assert [u["text"] for u in stored].count(TAKEN_BACK) == 1
    returns = sum(
        _metric(r.get("/metrics").text, 'chorus_handoff_returns_total{by="timeout"}')
        for r in replicas
    )
    assert returns == 1


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


class Helpdesk:
    """A helpdesk's webhook receiver on 127.0.0.1: it records each request, answers 503 to
    the first ``failures`` and 400 to the events named in ``refuses``."""

    def __init__(self, failures: int, refuses: set[str]) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.failures = failures
        self.refuses = refuses
        self.delivered: list[dict[str, Any]] = []
        self.arrived = threading.Condition()
        self.app = FastAPI()

        @self.app.post("/hook")
        async def hook(request: Request) -> Response:
            body = await request.body()
            with self.arrived:
                self.requests.append((dict(request.headers), body))
                if len(self.requests) <= self.failures:
                    status = 503
                else:
                    event = json.loads(body)
                    status = 400 if event["event"] in self.refuses else 200
                    self.delivered.append(event)
                self.arrived.notify_all()
            return Response(status_code=status)

    def wait_for(self, count: int) -> list[dict[str, Any]]:
        """The first ``count`` events answered (200 or 400), once they have come."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.delivered) >= count, timeout=60)
            return self.delivered[:count]


def test_a_helpdesk_is_told_of_each_step_signed_retried_and_in_order(
    services: Any, agent: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(composition, "WEBHOOK_FIRST_DELAY", 0.01)
    helpdesk = Helpdesk(failures=2, refuses={"handoff.claimed"})
    hook = str(httpx.URL(services(helpdesk.app).url).copy_with(path="/hook"))
    client = agent(pipeline(services, webhook=hook), operator_key=OPERATOR_KEY)
    asked = client.post("/", json={"user_id": "ivy", "payload": "I need a human"}).json()
    dialog_id = asked["dialog_id"]
    (requested,) = helpdesk.wait_for(1)
    assert requested["event"] == "handoff.requested"
    assert requested["handoff"]["dialog_id"] == dialog_id
    assert [u["text"] for u in requested["history"]] == ["I need a human"]
    # two 503s, then delivered: three tries of one delivery, each signed
    tries = helpdesk.requests[:3]
    assert len({headers["x-chorus-delivery"] for headers, _ in tries}) == 1
    for headers, body in tries:
        signed = headers["x-chorus-timestamp"].encode() + b"." + body
        digest = hmac.new(OPERATOR_KEY.encode(), signed, hashlib.sha256).hexdigest()
        assert headers["x-chorus-signature"] == f"sha256={digest}"

    assert client.post("/", json={"user_id": "ivy", "payload": "Anyone?"}).status_code == 202
    desk = operator(client, "desk@helpdesk")
    client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=desk)
    client.post(
        f"/api/operator/dialogs/{dialog_id}/messages", headers=desk, json={"text": "Yes, me."}
    )
    client.post(f"/api/operator/dialogs/{dialog_id}/handback", headers=desk)
    events = helpdesk.wait_for(4)
    assert [e["event"] for e in events] == [
        "handoff.requested",
        "handoff.message",
        "handoff.claimed",
        "handoff.returned",
    ]
    assert events[1]["utterance"]["text"] == "Anyone?"
    assert events[3]["handoff"]["returned_by"] == "operator"
    # the refused one (400) was not tried again
    claimed = [b for _, b in helpdesk.requests if json.loads(b)["event"] == "handoff.claimed"]
    assert len(claimed) == 1


def test_metrics_count_handoffs_and_time_the_claim_and_the_hold(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services, patterns=["^operator!$"]), operator_key=OPERATOR_KEY)
    for user, text in [("kim", "I want to talk to a human"), ("lee", "operator!")]:
        client.post("/", json={"user_id": user, "payload": text})
    client.post("/", json={"user_id": "max", "payload": "Hello!"})
    dialog_ids = [e["handoff"]["dialog_id"] for e in client.get(
        "/api/operator/dialogs", headers=operator(client)
    ).json()["dialogs"]]  # fmt: skip
    assert len(dialog_ids) == 2
    for dialog_id in dialog_ids:
        client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator(client))
    client.post(f"/api/operator/dialogs/{dialog_ids[0]}/handback", headers=operator(client))
    # closing the other dialog ends its handoff: the operator has nothing left to answer
    held = client.get(f"/api/operator/dialogs/{dialog_ids[1]}", headers=operator(client)).json()
    client.post("/", json={"user_id": held["handoff"]["user_id"], "payload": "/close"})
    assert client.get("/api/operator/dialogs", headers=operator(client)).json()["dialogs"] == []

    text = client.get("/metrics").text
    assert _metric(text, 'chorus_handoffs_total{by="skill"}') == 1
    assert _metric(text, 'chorus_handoffs_total{by="rule"}') == 1
    assert _metric(text, "chorus_turns_total") == 3  # the handoff rate: 2 of 3 turns
    assert _metric(text, "chorus_handoff_claim_seconds_count") == 2
    assert _metric(text, "chorus_handoff_held_seconds_count") == 2
    assert _metric(text, 'chorus_handoff_returns_total{by="operator"}') == 1
    assert _metric(text, 'chorus_handoff_returns_total{by="closed"}') == 1


@pytest.mark.both_stores
def test_export_and_import_keep_what_a_person_said_and_what_they_were_told(
    services: Any, agent: AgentFactory, tmp_path: Path, db_url: str
) -> None:
    client = agent(pipeline(services), operator_key=OPERATOR_KEY)
    dialog_id = client.post("/", json={"user_id": "ned", "payload": "I need a human"}).json()[
        "dialog_id"
    ]
    client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator(client))
    client.post("/", json={"user_id": "ned", "payload": "Still there?"})
    client.post(
        f"/api/operator/dialogs/{dialog_id}/messages",
        headers=operator(client),
        json={"text": "Yes"},
    )
    backup = tmp_path / "backup.jsonl"
    exported = CliRunner().invoke(cli, ["export", "--all", "-o", str(backup), "--db", db_url])
    assert exported.exit_code == 0, exported.output
    target = f"sqlite:///{tmp_path}/restored.db"
    imported = CliRunner().invoke(cli, ["import", str(backup), "--db", target])
    assert imported.exit_code == 0, imported.output
    (restored,) = stored_dialogs(target)
    assert [
        (u.text, getattr(u, "handed_off", None), getattr(u, "operator", None))
        for u in restored.utterances
    ] == [
        ("I need a human", False, None),
        (ANNOUNCE, None, None),
        ("Still there?", True, None),
        ("Yes", None, "ann"),
    ]


@pytest.mark.served  # a WebSocket to the agent's address
def test_a_person_asked_for_through_the_api_is_announced_to_the_user(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services), operator_key=OPERATOR_KEY, api_key=API_KEY)
    reader = {"X-API-Key": API_KEY}
    with socket(client) as ws:
        say(ws, "Hello!", user_id="oli")
        dialog_id = frame(ws)["dialog_id"]
        url = f"/api/dialogs/{dialog_id}/handoff"
        assert client.post(url, json={"reason": "VIP"}, headers=operator(client)).status_code == 401
        asked = client.post(url, json={"reason": "VIP"}, headers=reader)
        assert asked.status_code == 201 and asked.json()["handoff"]["requested_by"] == "api"
        assert client.post(url, json={}, headers=reader).status_code == 409  # already
        # The user's next message is kept, and what they were told meanwhile comes.
        say(ws, "Hello again", user_id="oli")
        told = frame(ws)
        assert (told["response"], told["active_skill"]) == (ANNOUNCE, "handoff")
        given_back = client.delete(url, headers=reader)
        assert given_back.json()["handoff"]["returned_by"] == "api"
        say(ws, "Hello!", user_id="oli")
        assert frame(ws)["active_skill"] == "greeting"


@pytest.mark.served  # a WebSocket to the agent's address
def test_a_websocket_following_events_gets_the_operators_words_and_each_change(
    services: Any, agent: AgentFactory
) -> None:
    client = agent(pipeline(services), operator_key=OPERATOR_KEY)
    with socket(client, "?events=true") as ws:
        say(ws, "Can I speak with a real person?", user_id="pat")
        events = [frame(ws)]
        while events[-1]["event"] != "answer":
            events.append(frame(ws))
        answer = events[-1]["data"]
        assert answer["response"] == ANNOUNCE and answer["handoff"]["state"] == "waiting"
        dialog_id = answer["dialog_id"]
        client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=operator(client))
        assert frame(ws) == {
            "event": "handoff",
            "data": {"state": "held", "operator": "ann", "since": frame_since(client, dialog_id)},
        }
        client.post(
            f"/api/operator/dialogs/{dialog_id}/messages",
            headers=operator(client),
            json={"text": "Ann here."},
        )
        reply = frame(ws)
        assert reply["event"] == "reply"
        assert (reply["data"]["text"], reply["data"]["operator"]) == ("Ann here.", "ann")
        client.post(f"/api/operator/dialogs/{dialog_id}/handback", headers=operator(client))
        back = frame(ws)
        assert (back["event"], back["data"]["state"]) == ("handoff", "returned")


def frame_since(client: httpx.Client, dialog_id: str) -> str:
    """When the dialog's handoff entered its present state, as the operator reads it."""
    read = client.get(f"/api/operator/dialogs/{dialog_id}", headers=operator(client)).json()
    since: str = read["handoff"]["claimed_at"]
    return since
