"""The last-chance skill always answers, with a low confidence."""

import httpx

from skills.fallback.app import ANSWERS, app
from tests.support.servers import serving
from tests.support.views import view


def test_answers_everything_with_low_confidence() -> None:
    with serving(app) as server:
        answer = httpx.post(f"{server.url}/respond",
                            json={"dialogs": [view("x"), view("a", "b", "c")]}).json()
    assert [a[0]["text"] for a in answer] == [ANSWERS[0], ANSWERS[1]]
    assert all(a[0]["confidence"] <= 0.1 for a in answer)
