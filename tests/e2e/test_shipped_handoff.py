"""The shipped pipeline.json hands a dialog to a person when, and only when, the agent has
an operator key (docs/handoff.md, "Turn it on"): a newcomer who sets CHORUS_OPERATOR_KEY and
runs `make run` gets the handoff skill and the pipeline's `handoff` section; without the key
the skill is off, listed as off with why, and the turn is answered as before."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import AgentFactory
from tests.e2e.test_default_pipeline import ROOT, shipped_pipeline
from tests.support.servers import ServerThread

OPERATOR_KEY = "shipped-operator-key-0123"
ASK = "I want to talk to a human"
OPERATOR = {"X-Operator-Key": OPERATOR_KEY, "X-Operator": "ann"}


def shipped_words() -> dict[str, Any]:
    """The `handoff` section pipeline.json ships."""
    section: dict[str, Any] = json.loads((ROOT / "pipeline.json").read_text())["handoff"]
    return section


def post(client: httpx.Client, text: str, user: str = "kim") -> httpx.Response:
    return client.post("/", json={"user_id": user, "payload": text})


def test_with_an_operator_key_the_shipped_bot_hands_off_and_takes_back(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    monkeypatch.setenv("CHORUS_OPERATOR_KEY", OPERATOR_KEY)  # as `make run` would read it
    client = agent(shipped_pipeline(services))

    asked = post(client, ASK)
    assert asked.status_code == 200, asked.text
    answer = asked.json()
    assert answer["response"] == shipped_words()["announce"]
    assert answer["active_skill"] == "handoff"
    assert answer["handoff"]["state"] == "waiting"
    dialog_id = answer["dialog_id"]

    inbox = client.get("/api/operator/dialogs", headers=OPERATOR).json()
    assert dialog_id in json.dumps(inbox)
    held = post(client, "Hello? Anyone?")
    assert held.status_code == 202 and held.json()["response"] == ""

    base = f"/api/operator/dialogs/{dialog_id}"
    assert client.post(f"{base}/claim", headers=OPERATOR).status_code == 200
    written = client.post(f"{base}/messages", headers=OPERATOR, json={"text": "Ann here."})
    assert written.status_code in (200, 201), written.text
    replies = client.get(
        f"/api/chat/dialogs/{dialog_id}/replies",
        params={"user_id": "kim", "after": answer["utt_id"]},
    ).json()
    assert [r["text"] for r in replies["replies"]] == ["Ann here."]
    assert client.post(f"{base}/handback", headers=OPERATOR).status_code == 200

    again = post(client, "Hello!")
    assert again.status_code == 200 and again.json()["active_skill"] == "greeting"
    (dialog,) = client.get("/api/user/kim").json()
    assert "Ann here." in [u["text"] for u in dialog["utterances"]]


def test_without_an_operator_key_the_handoff_skill_is_off_and_the_turn_answered_as_before(
    agent: AgentFactory,
    services: Callable[[FastAPI], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    monkeypatch.delenv("CHORUS_OPERATOR_KEY", raising=False)
    client = agent(shipped_pipeline(services))

    info = client.get("/api/pipeline").json()
    assert "handoff" not in {s["name"] for s in info["services"]}
    off = {d["name"]: d["reason"] for d in info["disabled"]}
    assert off["handoff"] == "requires_env: CHORUS_OPERATOR_KEY not set"

    # As before: the same turn on the pipeline without the handoff skill and section, a
    # first turn too (the two agents share the store: another user's)
    before = shipped_pipeline(services)
    del before["services"]["skills"]["handoff"], before["handoff"]
    earlier = agent(before)

    asked, expected = post(client, ASK), post(earlier, ASK, user="lee")
    assert asked.status_code == expected.status_code == 200, asked.text
    assert "handoff" not in asked.json()
    # The same skill answers (its words may vary: the small talk draws among its own).
    assert asked.json()["active_skill"] == expected.json()["active_skill"], asked.json()
    assert asked.json()["response"] != shipped_words()["announce"]
    (dialog,) = client.get("/api/user/kim").json()
    human = dialog["utterances"][0]
    assert "handoff" not in {h["skill_name"] for h in human["hypotheses"]}
