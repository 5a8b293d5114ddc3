"""The last-chance skill always answers: low confidence, and calmly when the user is toxic."""

from typing import Any

import httpx

from skills.fallback.app import ANSWERS, CALM_ANSWERS, app
from tests.support.servers import serving
from tests.support.views import view


def flagged(dialog: dict[str, Any], *, toxic: bool) -> dict[str, Any]:
    words = ["idiot"] if toxic else []
    dialog["utterances"][-1]["annotations"] = {"badwords": {"toxic": toxic, "words": words}}
    return dialog


def respond(*dialogs: dict[str, Any]) -> list[list[dict[str, Any]]]:
    with serving(app) as server:
        response = httpx.post(f"{server.url}/respond", json={"dialogs": list(dialogs)})
    response.raise_for_status()
    answer: list[list[dict[str, Any]]] = response.json()
    return answer


def test_answers_everything_with_low_confidence() -> None:
    answer = respond(view("x"), view("a", "b", "c"), flagged(view("fine"), toxic=False))
    assert [a[0]["text"] for a in answer] == [ANSWERS[0], ANSWERS[1], ANSWERS[0]]
    assert all(a[0]["confidence"] == 0.1 for a in answer)


def test_a_toxic_utterance_gets_a_calm_line() -> None:
    first, later = respond(flagged(view("you idiot"), toxic=True),
                           flagged(view("a", CALM_ANSWERS[0], "idiot"), toxic=True))
    assert first[0]["text"] == CALM_ANSWERS[0]
    assert first[0]["text"].startswith("I'd rather keep our conversation friendly")
    assert first[0]["confidence"] == 0.3
    assert later[0]["text"] == CALM_ANSWERS[1]


def test_health_and_bad_body() -> None:
    with serving(app) as server:
        health = httpx.get(f"{server.url}/health").json()
        refused = httpx.post(f"{server.url}/respond", json={})
    assert health == {"status": "ok", "service": "fallback", "role": "skill"}
    assert refused.status_code == 422
    assert "dialogs" in refused.text
