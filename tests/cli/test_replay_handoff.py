"""`chorus replay` over dialogs a person took over (docs/handoff.md): the
messages an operator answered are left out, no skill of the candidate sees them, and the
summary says how many there were."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from typer.testing import CliRunner

from agent.cli.main import app
from agent.sdk import DialogView, Service, SkillHypothesis
from skills.handoff.app import app as handoff_app
from tests.conftest import agents, service_entry
from tests.support.servers import ServerThread

OPERATOR_KEY = "operator-key-0123456789"


def recording_skill(heard: list[str]) -> FastAPI:
    """Answers every message, and keeps the text of each it was asked about."""
    service = Service("recorder")

    @service.skill
    def answer(dialog: DialogView) -> SkillHypothesis:
        heard.append(dialog.human_utterance.text)
        return SkillHypothesis(text=f"heard {dialog.human_utterance.text}", confidence=0.5)

    return service.app


def pipeline(services: Callable[[FastAPI], ServerThread], heard: list[str]) -> dict[str, Any]:
    return {
        "services": {
            "skills": {
                "handoff": service_entry(services(handoff_app).url),
                "recorder": service_entry(services(recording_skill(heard)).url),
            },
            "response_selectors": {"best": {"connector": {"builtin": "highest_confidence"}}},
        },
        "handoff": {"announce": "A person is coming."},
    }


def test_a_replay_leaves_out_what_a_person_answered(
    tmp_path: Path, db_url: str, services: Callable[[FastAPI], ServerThread]
) -> None:
    stored_heard: list[str] = []
    with agents(tmp_path, db_url) as start:
        client = start(pipeline(services, stored_heard), operator_key=OPERATOR_KEY)
        desk = {"X-Operator-Key": OPERATOR_KEY, "X-Operator": "ann"}

        def say(text: str) -> Any:
            return client.post("/", json={"user_id": "joe", "payload": text}).json()

        say("Hello")
        dialog_id = say("I want to talk to a human")["dialog_id"]
        client.post(f"/api/operator/dialogs/{dialog_id}/claim", headers=desk)
        client.post(
            f"/api/operator/dialogs/{dialog_id}/messages", headers=desk, json={"text": "Hi"}
        )
        say("Is it really you?")
        client.post(
            f"/api/operator/dialogs/{dialog_id}/messages", headers=desk, json={"text": "Yes"}
        )
        client.post(f"/api/operator/dialogs/{dialog_id}/handback", headers=desk)
        say("Bye")
    assert stored_heard == ["Hello", "I want to talk to a human", "Bye"]

    candidate_heard: list[str] = []
    candidate = tmp_path / "candidate.json"
    candidate.write_text(json.dumps(pipeline(services, candidate_heard)))
    out = tmp_path / "diffs.jsonl"
    result = CliRunner().invoke(
        app, ["replay", "--pipeline", str(candidate), "--db", db_url, "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert sorted(candidate_heard) == sorted(["Hello", "I want to talk to a human", "Bye"])
    diffs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(diffs) == 3
    assert "with a person      1 messages an operator answered" in result.output
