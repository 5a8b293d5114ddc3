"""The last-chance skill always answers: low confidence, and calmly when the user is toxic."""

from typing import Any

import pytest

from agent.sdk.testing import ServiceClient, view
from skills.fallback.app import ANSWERS, CALM_ANSWERS, QUESTION_ANSWERS, app


def flagged(dialog: dict[str, Any], *, toxic: bool) -> dict[str, Any]:
    words = ["idiot"] if toxic else []
    dialog["utterances"][-1]["annotations"] = {"badwords": {"toxic": toxic, "words": words}}
    return dialog


def respond(*dialogs: dict[str, Any]) -> list[list[dict[str, Any]]]:
    with ServiceClient(app) as client:
        response = client.post("/respond", json={"dialogs": list(dialogs)})
    response.raise_for_status()
    answer: list[list[dict[str, Any]]] = response.json()
    return answer


def test_answers_everything_with_low_confidence() -> None:
    answer = respond(view("x"), view("a", "b", "c"), flagged(view("fine"), toxic=False))
    assert all(a[0]["text"] in ANSWERS for a in answer)
    assert all(a[0]["confidence"] == 0.1 for a in answer)


def test_a_question_is_told_the_bot_does_not_know() -> None:
    (answer,) = respond(view("What is 17 times 23?"))
    assert answer[0]["text"] in QUESTION_ANSWERS


@pytest.mark.parametrize(
    "text",
    [
        "how do you say thank you in japanese",
        "be honest is taylor swift overrated",
        "whats 3/4 + 1/8",
    ],
)
def test_a_question_typed_without_its_mark_is_told_the_bot_does_not_know(text: str) -> None:
    """ "I see. And how do you feel about that?" answered "how do you say thank you in
    japanese": a question is one with or without its mark."""
    (answer,) = respond(view(text))
    assert answer[0]["text"] in QUESTION_ANSWERS
    (said,) = respond(view("i went hiking yesterday"))
    assert said[0]["text"] in ANSWERS


def test_the_answers_vary_and_never_repeat_the_window() -> None:
    dialogs = [view(f"statement {i}", dialog_id=f"d{i}") for i in range(30)]
    texts = {a[0]["text"] for a in respond(*dialogs)}
    assert len(texts) >= 3  # seeded per dialog: 30 dialogs do not all get one line
    for said in ANSWERS:
        (answer,) = respond(view("hi", said, "hmm"))
        assert answer[0]["text"] != said
    said_all = [t for line in QUESTION_ANSWERS[:-1] for t in ("why?", line)]
    (answer,) = respond(view(*said_all, "why?"))
    assert answer[0]["text"] == QUESTION_ANSWERS[-1]


def test_a_long_dialog_repeats_no_question_line_until_all_were_said() -> None:
    """Statements between questions do not push the questions' lines out of the skill's
    memory: seven questions answered apart, beyond the window, get seven lines."""
    attributes: dict[str, Any] = {}
    said = []
    for turn in range(14):
        text = f"question {turn}?" if turn % 2 else f"statement {turn}"
        dialog = view(text, bot_attributes=attributes, dialog_id=f"long-{turn}")
        ((answer,),) = respond(dialog)
        attributes = answer["bot_attributes"]  # the agent keeps the chosen answer's
        if turn % 2:
            said.append(answer["text"])
    assert len(set(said)) == len(said) == 7


def test_a_toxic_utterance_gets_a_calm_line() -> None:
    first, later = respond(
        flagged(view("you idiot"), toxic=True),
        flagged(view("a", CALM_ANSWERS[0], "idiot"), toxic=True),
    )
    assert first[0]["text"] in CALM_ANSWERS
    assert first[0]["confidence"] == 0.3
    assert later[0]["text"] == CALM_ANSWERS[1]


def test_health_and_bad_body() -> None:
    with ServiceClient(app) as client:
        health = client.get("/health").json()
        refused = client.post("/respond", json={})
    assert health == {"status": "ok", "service": "fallback", "role": "skill"}
    assert refused.status_code == 422
    assert "dialogs" in refused.text
