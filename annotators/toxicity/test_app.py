"""The toxicity candidate annotator over real HTTP: one annotation per hypothesis."""

from typing import Any

from agent.sdk.testing import ServiceClient, view
from annotators.toxicity.app import app


def hypothesis(text: str, skill_name: str = "x") -> dict[str, Any]:
    return {"skill_name": skill_name, "text": text, "confidence": 0.5}


def test_one_annotation_per_hypothesis_in_order() -> None:
    with ServiceClient(app) as client:
        answer = client.post(
            "/respond",
            json={
                "dialogs": [
                    view(
                        "you are dumb",
                        hypotheses=[
                            hypothesis("Sorry you feel that way.", "smalltalk"),
                            hypothesis("No, YOU are the idiot!!! Shut up.", "llm"),
                            hypothesis("Let's talk about something else.", "fallback"),
                        ],
                    ),
                    view("hi", hypotheses=[hypothesis("Hello!")]),
                ]
            },
        ).json()
    assert answer == [
        [
            {"toxic": False, "words": []},
            {"toxic": True, "words": ["idiot", "shut up"]},
            {"toxic": False, "words": []},
        ],
        [{"toxic": False, "words": []}],
    ]


def test_the_human_utterance_is_not_what_is_judged() -> None:
    with ServiceClient(app) as client:
        answer = client.post(
            "/respond",
            json={
                "dialogs": [view("shut up, moron", hypotheses=[hypothesis("I'm here to help.")])]
            },
        ).json()
    assert answer == [[{"toxic": False, "words": []}]]


def test_no_hypotheses_no_annotations() -> None:
    with ServiceClient(app) as client:
        answer = client.post("/respond", json={"dialogs": [view("hi")]}).json()
    assert answer == [[]]


def test_health() -> None:
    with ServiceClient(app) as client:
        health = client.get("/health").json()
    assert health == {"status": "ok", "service": "toxicity", "role": "candidate_annotator"}


def test_bad_input_is_refused_with_a_message() -> None:
    bad = view("hi", hypotheses=[{"skill_name": "x", "confidence": 0.5}])
    with ServiceClient(app) as client:
        response = client.post("/respond", json={"dialogs": [bad]})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "text"
