"""The confidence selector picks the most confident hypothesis and says why."""

import httpx

from response_selectors.confidence.app import app
from tests.support.servers import serving
from tests.support.views import view


def hyp(skill: str, confidence: float) -> dict[str, object]:
    return {"skill_name": skill, "text": skill, "confidence": confidence, "annotations": {}}


def test_highest_confidence_wins_and_ties_go_to_the_first() -> None:
    with serving(app) as server:
        answer = httpx.post(f"{server.url}/respond", json={"dialogs": [
            view("x", hypotheses=[hyp("a", 0.2), hyp("b", 0.9), hyp("c", 0.9)]),
        ]}).json()
    assert answer[0]["index"] == 1
    assert answer[0]["reason"] == "b had the highest confidence (0.90) of 3 hypotheses"
