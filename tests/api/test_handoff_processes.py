"""Handoffs across two agent processes on one database (SQLite's file, the tests'
MongoDB), nothing shared but the store: of operators claiming each dialog at once on both,
exactly one wins; what the operator writes on one process reaches the user's WebSocket on
the other; the handback on one is the bot's answer on the other."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_chat_ws import socket
from tests.api.test_handoff import ANNOUNCE, OPERATOR_KEY, frame, operator, pipeline, say
from tests.conftest import patient
from tests.support.events import events_of
from tests.support.processes import agent_process

# What it checks depends on the store: it runs on SQLite and MongoDB (tests/conftest.py).
pytestmark = pytest.mark.both_stores

#: Dialogs handed off and claimed twice at once: each a chance for a double claim.
DIALOGS = 6


@pytest.mark.timeout(600)  # two agent processes started on a busy machine
def test_two_agent_processes_give_each_dialog_to_one_operator_and_deliver_across(
    services: Any, db_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "pipeline.json"
    config.write_text(json.dumps(patient(pipeline(services))))
    env = {"CHORUS_DB_URL": db_url, "CHORUS_PIPELINE": str(config)}
    env["CHORUS_OPERATOR_KEY"] = OPERATOR_KEY
    with (
        agent_process(env) as (first, _),
        agent_process(env) as (second, _),
        httpx.Client(base_url=first, timeout=60) as user_side,
        httpx.Client(base_url=second, timeout=60) as operator_side,
    ):
        asked = [
            user_side.post("/", json={"user_id": f"u{i}", "payload": "I need a human"}).json()
            for i in range(DIALOGS)
        ]
        assert {a["response"] for a in asked} == {ANNOUNCE}

        def claim(args: tuple[httpx.Client, str, str]) -> int:
            client, name, dialog_id = args
            url = f"/api/operator/dialogs/{dialog_id}/claim"
            return client.post(url, headers=operator(client, name)).status_code

        attempts = [
            (client, name, a["dialog_id"])
            for a in asked
            for client, name in [(user_side, "ann"), (operator_side, "bo")]
        ]
        with ThreadPoolExecutor(max_workers=4) as pool:
            codes = list(pool.map(claim, attempts))
        assert [sorted(codes[i : i + 2]) for i in range(0, len(codes), 2)] == [[200, 409]] * DIALOGS
        inbox = operator_side.get("/api/operator/dialogs", headers=operator(operator_side))
        holders = {e["handoff"]["operator"] for e in inbox.json()["dialogs"]}
        assert len(inbox.json()["dialogs"]) == DIALOGS and holders <= {"ann", "bo"}

        with socket(user_side) as ws:
            say(ws, "Hello?", user_id="u0")  # kept for the operator: no frame
            dialog_id = asked[0]["dialog_id"]
            holder = next(
                e["handoff"]["operator"]
                for e in inbox.json()["dialogs"]
                if e["handoff"]["dialog_id"] == dialog_id
            )
            # the message is stored before the operator answers it: read it back first
            written = _when_kept(operator_side, dialog_id, "Hello?")
            assert written["handed_off"] is True
            operator_side.post(
                f"/api/operator/dialogs/{dialog_id}/messages",
                headers=operator(operator_side, holder),
                json={"text": "Hi from the other process."},
            )
            reached = frame(ws)
            assert (reached["response"], reached["operator"]) == (
                "Hi from the other process.",
                holder,
            )
            url = f"/api/operator/dialogs/{dialog_id}/handback"
            assert operator_side.post(url, headers=operator(operator_side, holder)).is_success
            say(ws, "Hello!", user_id="u0")
            assert frame(ws)["active_skill"] == "greeting"


def _when_kept(client: httpx.Client, dialog_id: str, text: str) -> dict[str, Any]:
    """The user's message ``text`` as the operator's live view shows it once stored."""
    with client.stream(
        "GET", f"/api/operator/dialogs/{dialog_id}/events", headers=operator(client)
    ) as live:
        for kind, data in events_of(live.iter_lines()):
            if kind == "utterance" and data["text"] == text:
                return data
    raise AssertionError(f"{text!r} never came")
