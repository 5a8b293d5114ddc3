"""The SDK builds a real service: batches in and out, a health route, clear 422s, and a
handler's contract checked when it is decorated and when it answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.sdk import DialogView, HypothesisView, Service, SkillHypothesis, SkillSelection
from agent.sdk.contracts import CONTRACT_HEADER, HandlerSignatureError
from agent.sdk.testing import ServiceClient, hypothesis, view
from tests.conftest import AgentFactory, service_entry

ROOT = Path(__file__).resolve().parents[2]


def echo_service() -> Service:
    service = Service("echo")

    @service.skill
    async def echo(dialog: DialogView) -> SkillHypothesis:
        return SkillHypothesis(text=dialog.human_utterance.text.upper(), confidence=0.5)

    return service


def test_a_batch_gets_one_answer_per_dialog_in_order() -> None:
    with ServiceClient(echo_service()) as client:
        answer = client.respond(view("one"), view("two"), view("three"))
        assert [a[0]["text"] for a in answer] == ["ONE", "TWO", "THREE"]
        assert answer[0][0] == {
            "text": "ONE",
            "confidence": 0.5,
            "human_attributes": {},
            "bot_attributes": {},
        }
        assert client.health() == {"status": "ok", "service": "echo", "role": "skill"}


def test_a_handler_reads_the_bot_line_a_reply_answers() -> None:
    """``bot_utterance``: what the bot said last, the question a reply answers; None on a
    dialog's first turn."""
    service = Service("replies")

    @service.skill
    def reply(dialog: DialogView) -> SkillHypothesis:
        asked = dialog.bot_utterance
        said = (
            "you opened" if asked is None else f"to {asked.text!r}: {dialog.human_utterance.text}"
        )
        return SkillHypothesis(text=said, confidence=0.5)

    with ServiceClient(service) as client:
        first, later = client.respond(
            view("hi"), view("hi", "Hello! What do you do for fun?", "Mostly reading")
        )
    assert first[0]["text"] == "you opened"
    assert later[0]["text"] == "to 'Hello! What do you do for fun?': Mostly reading"


def test_bad_input_is_a_422_that_names_the_field() -> None:
    with ServiceClient(echo_service()) as client:
        response = client.post("/respond", json={"dialogs": [{"utterances": []}]})
    assert response.status_code == 422
    missing = {tuple(e["loc"]) for e in response.json()["detail"]}
    assert ("body", "dialogs", 0, "dialog_id") in missing


def test_sync_handlers_and_other_roles() -> None:
    service = Service("picker")

    @service.skill_selector
    def pick(dialog: DialogView) -> list[str]:
        return ["greeting"] if "hi" in dialog.last_utterance.text else []

    with ServiceClient(service) as client:
        assert client.respond(view("hi"), view("bye")) == [["greeting"], []]


def test_a_skill_selector_can_say_why_and_what_it_decides_about() -> None:
    service = Service("decider")

    @service.skill_selector
    def pick(dialog: DialogView) -> SkillSelection:
        return SkillSelection(skills=["greeting"], reason="said hi", decides=["greeting", "faq"])

    with ServiceClient(service) as client:
        answer = client.respond(view("hi"))
    assert answer == [{"skills": ["greeting"], "reason": "said hi", "decides": ["greeting", "faq"]}]


def test_a_candidate_annotator_sees_every_hypothesis() -> None:
    service = Service("lengths")

    @service.candidate_annotator
    def length(dialog: DialogView, candidate: HypothesisView) -> int:
        return len(candidate.text)

    hypotheses = [hypothesis("hi"), hypothesis("hello", skill_name="y")]
    with ServiceClient(service) as client:
        assert client.respond(view("x", hypotheses=hypotheses)) == [[2, 5]]


def test_a_response_annotator_has_its_decorator() -> None:
    service = Service("shout")

    @service.response_annotator
    def shout(dialog: DialogView) -> dict[str, bool]:
        return {"shouting": dialog.last_utterance.text.isupper()}

    with ServiceClient(service) as client:
        assert client.health()["role"] == "response_annotator"
        assert client.respond(view("hi", "HELLO")) == [{"shouting": True}]


def test_a_handler_with_the_wrong_arguments_is_refused_when_decorated() -> None:
    service = Service("wrong")
    with pytest.raises(HandlerSignatureError) as refused:

        @service.candidate_annotator  # type: ignore[type-var]
        def mark(dialog: DialogView) -> int:
            return 1

    message = str(refused.value)
    assert "test_service.test_a_handler_with_the_wrong_arguments" in message
    assert "mark" in message and "'wrong'" in message
    assert "def handler(dialog, hypothesis)" in message
    with pytest.raises(HandlerSignatureError, match="def handler\\(dialog\\)"):
        service.skill(lambda: [])  # type: ignore[type-var]
    with pytest.raises(HandlerSignatureError, match="not a function"):
        service.annotator("respond")  # type: ignore[type-var]


def test_a_broken_handler_stops_the_import_naming_it(tmp_path: Path) -> None:
    """What an author sees when the service starts: the import fails, naming the handler."""
    (tmp_path / "broken_service.py").write_text(
        "from agent.sdk import Service\n"
        "service = Service('broken')\n"
        "@service.skill\n"
        "def answer(dialog, history):\n"
        "    return []\n"
    )
    started = subprocess.run(
        [sys.executable, "-c", "import broken_service"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert started.returncode != 0
    assert "HandlerSignatureError" in started.stderr
    assert "skill handler broken_service.answer of service 'broken'" in started.stderr


def broken_skill() -> Service:
    service = Service("broken")

    @service.skill
    def broken(dialog: DialogView) -> Any:
        return [{"text": "sure", "confidence": 2}]

    return service


def test_a_handler_breaking_its_contract_answers_pydantics_message() -> None:
    with ServiceClient(broken_skill()) as client:
        response = client.post("/respond", json={"dialogs": [view("x")]})
    assert response.status_code == 500
    assert response.headers[CONTRACT_HEADER] == "1"
    message = response.json()["message"]
    assert message.startswith("skill 'broken' (tests.sdk.test_service.broken_skill.")
    assert "0.confidence: Input should be less than or equal to 1" in message


def test_the_agent_records_a_broken_contract_as_what_was_wrong(
    services: Any, agent: AgentFactory
) -> None:
    pipeline = {
        "services": {
            "skills": {
                "broken": service_entry(services(broken_skill().app).url),
                "echo": service_entry(services(echo_service().app).url),
            }
        }
    }
    client = agent(pipeline)
    reply = client.post("/", json={"user_id": "u", "payload": "hi"}).json()
    assert reply["response"] == "HI"
    human = client.get(f"/api/dialogs/{reply['dialog_id']}").json()["utterances"][0]
    (error,) = human["errors"]
    assert error["service"] == "broken"
    assert error["kind"] == "bad_response"
    assert "0.confidence: Input should be less than or equal to 1" in error["message"]
    assert "HTTP 500" not in error["message"]


def test_a_service_needs_exactly_one_handler() -> None:
    service = Service("empty")
    with pytest.raises(RuntimeError, match="has no handler"):
        service.app  # noqa: B018
    service.skill(lambda d: [])
    with pytest.raises(RuntimeError, match="already has a handler"):
        service.annotator(lambda d: {})


def test_the_sdk_does_not_import_the_agent_server() -> None:
    code = (
        "import sys, agent.sdk, agent.sdk.testing; bad = [m for m in sys.modules "
        "if m.startswith('agent.') and not m.startswith('agent.sdk')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
