"""The SDK builds a real service: batches in and out, a health route, clear 422s."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agent.sdk import DialogView, Service, SkillHypothesis, SkillSelection
from tests.support.servers import serving
from tests.support.views import view


def echo_service() -> Service:
    service = Service("echo")

    @service.skill
    async def echo(dialog: DialogView) -> SkillHypothesis:
        return SkillHypothesis(text=dialog.human_utterance.text.upper(), confidence=0.5)

    return service


def test_a_batch_gets_one_answer_per_dialog_in_order() -> None:
    with serving(echo_service().app) as server:
        body = {"dialogs": [view("one"), view("two"), view("three")]}
        answer = httpx.post(f"{server.url}/respond", json=body).json()
        assert [a[0]["text"] for a in answer] == ["ONE", "TWO", "THREE"]
        assert answer[0][0] == {
            "text": "ONE",
            "confidence": 0.5,
            "human_attributes": {},
            "bot_attributes": {},
        }
        assert httpx.get(f"{server.url}/health").json() == {
            "status": "ok",
            "service": "echo",
            "role": "skill",
        }


def test_bad_input_is_a_422_that_names_the_field() -> None:
    with serving(echo_service().app) as server:
        response = httpx.post(f"{server.url}/respond", json={"dialogs": [{"utterances": []}]})
        assert response.status_code == 422
        missing = {tuple(e["loc"]) for e in response.json()["detail"]}
        assert ("body", "dialogs", 0, "dialog_id") in missing


def test_sync_handlers_and_other_roles() -> None:
    service = Service("picker")

    @service.skill_selector
    def pick(dialog: DialogView) -> list[str]:
        return ["greeting"] if "hi" in dialog.last_utterance.text else []

    with serving(service.app) as server:
        answer = httpx.post(
            f"{server.url}/respond", json={"dialogs": [view("hi"), view("bye")]}
        ).json()
        assert answer == [["greeting"], []]


def test_a_skill_selector_can_say_why_and_what_it_decides_about() -> None:
    service = Service("decider")

    @service.skill_selector
    def pick(dialog: DialogView) -> SkillSelection:
        return SkillSelection(skills=["greeting"], reason="said hi", decides=["greeting", "faq"])

    with serving(service.app) as server:
        answer = httpx.post(f"{server.url}/respond", json={"dialogs": [view("hi")]}).json()
    assert answer == [{"skills": ["greeting"], "reason": "said hi", "decides": ["greeting", "faq"]}]


def test_a_handler_breaking_its_contract_fails_loudly_in_the_service() -> None:
    service = Service("broken")

    @service.skill
    def broken(dialog: DialogView) -> Any:
        return [{"text": "", "confidence": 2}]

    with serving(service.app) as server:
        response = httpx.post(f"{server.url}/respond", json={"dialogs": [view("x")]})
        assert response.status_code == 500  # the agent records it as that skill's failure


def test_a_service_needs_exactly_one_handler() -> None:
    service = Service("empty")
    with pytest.raises(RuntimeError, match="has no handler"):
        service.app  # noqa: B018
    service.skill(lambda d: [])
    with pytest.raises(RuntimeError, match="already has a handler"):
        service.annotator(lambda d: {})


def test_the_sdk_does_not_import_the_agent_server() -> None:
    import subprocess
    import sys

    code = (
        "import sys, agent.sdk; bad = [m for m in sys.modules if m.startswith('agent.') "
        "and not m.startswith('agent.sdk')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
