"""In-process services that promise to only read their view (``never_changes_view``) are
shown the turn's views themselves once their first calls have kept the promise; one that
breaks it during those calls is named in the log, changes nothing of the turn, and is
shown copies from then on."""

from __future__ import annotations

import logging

import pytest

from agent.connectors.in_process import InProcessConnector
from agent.connectors.shared_views import CHECK_EVERY, TRIAL_CALLS
from agent.sdk import DialogView, Service, SkillHypothesis
from tests.conftest import AgentFactory
from tests.support.views import view

#: Promises to only read its view, and does.
reader = Service("reader", never_changes_view=True)


@reader.skill
async def read(dialog: DialogView) -> SkillHypothesis:
    name = dialog.human.attributes.get("name", "stranger")
    return SkillHypothesis(text=f"{dialog.last_utterance.text}, {name}", confidence=0.9)


#: The same handler, without the promise: shown a copy on every call.
copier = Service("reader")
copier.skill(read)

#: Promises to only read its view, and writes into it.
liar = Service("liar", never_changes_view=True)


@liar.skill
async def lie(dialog: DialogView) -> SkillHypothesis:
    seen = sorted(dialog.human.attributes)
    dialog.human.attributes["meddled"] = True
    dialog.human_utterance.annotations["meddled"] = True
    return SkillHypothesis(text=f"found {seen}", confidence=0.9)


async def test_a_service_that_keeps_its_promise_answers_as_when_shown_copies() -> None:
    shown = DialogView.model_validate(view("Hello!", human_attributes={"name": "Ann"}))
    before = shown.model_dump()
    promised = InProcessConnector("reader", reader)
    copied = InProcessConnector("reader", copier)
    calls = TRIAL_CALLS + CHECK_EVERY + 2  # past the trial, and past one checked call
    answers = [await promised.call([shown]) for _ in range(calls)]
    assert answers == [await copied.call([shown])] * calls
    assert answers[0] == [
        [{"text": "Hello!, Ann", "confidence": 0.9, "human_attributes": {}, "bot_attributes": {}}]
    ]
    assert promised.views.promised, "a service that kept its promise is still trusted"
    assert shown.model_dump() == before


async def test_a_broken_promise_is_named_and_never_reaches_the_view(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shown = DialogView.model_validate(view("Hello!", human_attributes={"name": "Ann"}))
    before = shown.model_dump()
    connector = InProcessConnector("liar", liar)
    with caplog.at_level(logging.ERROR, logger="chorus.connectors"):
        answers = [await connector.call([shown]) for _ in range(TRIAL_CALLS + 3)]
    assert shown.model_dump() == before
    assert {str(a) for a in answers} == {
        str(
            [
                [
                    {
                        "text": "found ['name']",
                        "confidence": 0.9,
                        "human_attributes": {},
                        "bot_attributes": {},
                    }
                ]
            ]
        )
    }
    named = [r.getMessage() for r in caplog.records if "changed the view" in r.getMessage()]
    assert named == [
        "in-process service liar changed the view it was shown, though it promised not to "
        "(never_changes_view): it is shown copies from now on"
    ]


def test_the_stored_dialog_keeps_nothing_a_broken_promise_changed(agent: AgentFactory) -> None:
    client = agent(
        {
            "services": {
                "skills": {
                    "liar": {
                        "connector": {
                            "module": "tests.connectors.test_shared_views:liar",
                            "timeout": 10.0,
                        }
                    }
                }
            }
        }
    )
    for text in ["Hello!", "How are you?", *(["More?"] * TRIAL_CALLS)]:
        answer = client.post("/", json={"user_id": "ann", "payload": text}).json()
        assert answer["response"] == "found []", answer
    (dialog,) = client.get("/api/user/ann").json()
    assert len(dialog["utterances"]) == 2 * (TRIAL_CALLS + 2)
    assert "meddled" not in str(dialog)
