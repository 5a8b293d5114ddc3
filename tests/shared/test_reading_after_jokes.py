"""Whatever joke the bot just told, the turn after it is read the same way.

The joke is chosen at random, and the reading (shared/reading.py) once read the bot's last
line by its words: after some jokes "Another one?" or "What is Chorus?" went to the LLM, or
without one to the fallback, one conversation in a few dozen. Here every joke is followed
by those turns, through the real intents annotator (which makes the reading) and the
skills that answer them, as the agent runs them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.sdk.testing import ServiceClient, view
from annotators.intents.app import app as intents_app
from shared.jokes import JOKES
from skills.faq.app import app as faq_app
from skills.smalltalk.app import app as smalltalk_app

ROOT = Path(__file__).resolve().parents[2]
#: The confidence from which a cheap answer keeps the LLM out (pipeline.json's run_below).
RUN_BELOW = json.loads((ROOT / "pipeline.json").read_text())["services"]["skills"]["llm"][
    "run_below"
]


@pytest.fixture(scope="module")
def clients() -> Iterator[dict[str, ServiceClient]]:
    with (
        ServiceClient(intents_app) as intents,
        ServiceClient(smalltalk_app) as smalltalk,
        ServiceClient(faq_app) as faq,
    ):
        yield {"intents": intents, "smalltalk": smalltalk, "faq": faq}


def missed_after_each_joke(
    clients: dict[str, ServiceClient],
    text: str,
    skill: str,
    fits: Callable[[str, str], bool] = lambda joke, answer: True,
) -> list[str]:
    """The jokes after which ``skill`` does not answer ``text`` (the turn annotated by the
    intents annotator) at or above :data:`RUN_BELOW` with an answer that ``fits``."""
    dialogs = []
    for joke in JOKES:
        dialog = view("Tell me a joke", joke, text)
        dialog["utterances"][-2]["active_skill"] = "smalltalk"
        dialogs.append(dialog)
    annotated = clients["intents"].post("/respond", json={"dialogs": dialogs})
    annotated.raise_for_status()
    for dialog, intents in zip(dialogs, annotated.json(), strict=True):
        dialog["utterances"][-1]["annotations"] = {"intents": intents}
    answered = clients[skill].post("/respond", json={"dialogs": dialogs})
    answered.raise_for_status()
    answers: list[list[dict[str, Any]]] = answered.json()
    return [
        joke
        for joke, answer in zip(JOKES, answers, strict=True)
        if not answer or answer[0]["confidence"] < RUN_BELOW or not fits(joke, answer[0]["text"])
    ]


def test_another_one_after_any_joke_gets_another_joke(
    clients: dict[str, ServiceClient],
) -> None:
    def another(joke: str, answer: str) -> bool:
        return answer in JOKES and answer != joke

    missed = missed_after_each_joke(clients, "Another one?", "smalltalk", another)
    assert not missed, f"{len(missed)} of {len(JOKES)} jokes: {missed[:3]}"


def test_a_question_about_chorus_after_any_joke_is_the_faqs(
    clients: dict[str, ServiceClient],
) -> None:
    missed = missed_after_each_joke(clients, "What is Chorus?", "faq")
    assert not missed, f"{len(missed)} of {len(JOKES)} jokes: {missed[:3]}"
