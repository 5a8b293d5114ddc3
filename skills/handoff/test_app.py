"""The handoff skill asks for a person when the user wants one, and proposes nothing else."""

from typing import Any

import pytest

from agent.sdk.testing import ServiceClient, view
from skills.handoff.app import CONFIDENCE, REASON, app


def respond(*texts: str) -> list[list[dict[str, Any]]]:
    with ServiceClient(app) as client:
        response = client.post("/respond", json={"dialogs": [view(t) for t in texts]})
    response.raise_for_status()
    answer: list[list[dict[str, Any]]] = response.json()
    return answer


@pytest.mark.parametrize(
    "text",
    [
        "I want to talk to a human",
        "Can I speak with a real person?",
        "connect me to an operator please",
        "I need an agent",
        "Human please!",
        "put me through to a representative",
    ],
)
def test_a_request_for_a_person_hands_the_dialog_over(text: str) -> None:
    ((hypothesis,),) = respond(text)
    assert hypothesis["handoff"] == REASON and hypothesis["confidence"] == CONFIDENCE


@pytest.mark.parametrize(
    "text",
    [
        "Hello!",
        "Are you a human?",
        "I don't want to talk to a human",
        "What do people usually ask you?",
        "My manager is nice",
    ],
)
def test_anything_else_gets_no_hypothesis(text: str) -> None:
    assert respond(text) == [[]]
