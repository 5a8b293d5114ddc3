"""The confidence selector picks the best hypothesis after penalties, and says why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agent.sdk.errors import ConfigError
from agent.sdk.testing import ServiceClient, view
from response_selectors.confidence.app import app, fallback_below


@pytest.fixture(scope="module")
def client() -> Iterator[ServiceClient]:
    with ServiceClient(app) as client:
        yield client


def hyp(
    skill: str, confidence: float, text: str | None = None, toxic: bool | None = None
) -> dict[str, Any]:
    annotations = {} if toxic is None else {"toxicity": {"toxic": toxic, "words": []}}
    return {
        "skill_name": skill,
        "text": text or skill,
        "confidence": confidence,
        "annotations": annotations,
    }


def choose(client: ServiceClient, *dialogs: dict[str, Any]) -> list[dict[str, Any]]:
    response = client.post("/respond", json={"dialogs": list(dialogs)})
    assert response.status_code == 200, response.text
    answer: list[dict[str, Any]] = response.json()
    return answer


def test_highest_confidence_wins_and_ties_go_to_the_first(client: ServiceClient) -> None:
    (answer,) = choose(client, view("x", hypotheses=[hyp("a", 0.2), hyp("b", 0.9), hyp("c", 0.9)]))
    assert answer == {"index": 1, "reason": "b had the highest confidence (0.90) of 3 hypotheses"}


def test_a_toxic_hypothesis_loses_to_a_clean_less_confident_one(client: ServiceClient) -> None:
    (answer,) = choose(
        client,
        view(
            "hi",
            hypotheses=[
                hyp("faq", 0.82, toxic=False),
                hyp("smalltalk", 0.99, toxic=True),
                hyp("llm", 0.5),
                hyp("fallback", 0.1),
            ],
        ),
    )
    assert answer == {
        "index": 0,
        "reason": "faq won with score 0.82 (confidence 0.82) over 3 "
        "other hypotheses; penalised: smalltalk toxic (-1.00)",
    }


def test_repeating_the_previous_bot_utterance_is_held_back(client: ServiceClient) -> None:
    (answer,) = choose(
        client,
        view(
            "hello",
            "Hi! What's your name?",
            "hello",
            hypotheses=[
                hyp("greeting", 0.9, text="hi!  what's your name?"),
                hyp("smalltalk", 0.8, text="Hello again!"),
            ],
        ),
    )
    assert answer == {
        "index": 1,
        "reason": "smalltalk won with score 0.80 (confidence 0.80) "
        "over 1 other hypothesis; penalised: greeting repeat (-0.20)",
    }


def test_a_repeat_ties_with_a_fresh_answer_and_the_earlier_wins(client: ServiceClient) -> None:
    (answer,) = choose(
        client,
        view(
            "ok",
            "Sure.",
            "ok",
            hypotheses=[hyp("faq", 0.7, text="Fine."), hyp("smalltalk", 0.9, text="Sure.")],
        ),
    )
    assert answer["index"] == 0


def test_when_every_hypothesis_is_toxic_the_least_bad_answers_and_it_says_so(
    client: ServiceClient,
) -> None:
    (answer,) = choose(
        client,
        view(
            "you idiot",
            "Idiot.",
            "you idiot",
            hypotheses=[
                hyp("smalltalk", 0.7, text="Idiot.", toxic=True),
                hyp("llm", 0.6, toxic=True),
            ],
        ),
    )
    assert answer == {
        "index": 1,
        "reason": "every hypothesis was toxic, so the least bad was "
        "chosen: llm won with score -0.40 (confidence 0.60) over 1 other "
        "hypothesis; penalised: smalltalk toxic (-1.00), smalltalk repeat "
        "(-0.20), llm toxic (-1.00)",
    }


def test_several_hypotheses_of_one_skill_are_told_apart(client: ServiceClient) -> None:
    (answer,) = choose(
        client,
        view("x", hypotheses=[hyp("llm", 0.9, text="a", toxic=True), hyp("llm", 0.4, text="b")]),
    )
    assert answer == {
        "index": 1,
        "reason": "llm#1 won with score 0.40 (confidence 0.40) "
        "over 1 other hypothesis; penalised: llm#0 toxic (-1.00)",
    }


def test_a_batch_is_answered_per_dialog_in_order(client: ServiceClient) -> None:
    answers = choose(
        client,
        view("a", hypotheses=[hyp("faq", 0.3), hyp("llm", 0.6)], dialog_id="d1"),
        view("b", hypotheses=[hyp("faq", 0.3), hyp("llm", 0.6, toxic=True)], dialog_id="d2"),
        view("c", hypotheses=[hyp("fallback", 0.1)], dialog_id="d3"),
    )
    assert [a["index"] for a in answers] == [1, 0, 0]
    assert answers[2]["reason"] == "fallback had the highest confidence (0.10) of 1 hypothesis"


def test_health(client: ServiceClient) -> None:
    assert client.get("/health").json() == {
        "status": "ok",
        "service": "confidence",
        "role": "response_selector",
    }


def test_a_malformed_body_is_refused_naming_the_field(client: ServiceClient) -> None:
    dialog = view("x", hypotheses=[{"skill_name": "faq", "text": "hi"}])
    response = client.post("/respond", json={"dialogs": [dialog]})
    assert response.status_code == 422
    assert "confidence" in response.text


def test_nothing_to_choose_from_is_refused(client: ServiceClient) -> None:
    response = client.post("/respond", json={"dialogs": [view("x")]})
    assert response.status_code == 422
    assert "no hypotheses" in response.text


def test_the_reason_names_the_calibrated_answers_the_winner_beat(client: ServiceClient) -> None:
    corpus = {
        **hyp("smalltalk", 0.4),
        "routing": {"skill": "smalltalk", "kind": "corpus", "raw": 0.66},
    }
    (answer,) = choose(client, view("How far is the Moon?", hypotheses=[corpus, hyp("llm", 0.6)]))
    assert answer["index"] == 1
    assert answer["reason"] == (
        "llm had the highest confidence (0.60) of 2 hypotheses; "
        "it beat smalltalk: corpus, scored 0.66, fits 40 %"
    )


def test_the_reason_says_what_the_turns_reading_made_of_a_beaten_answer(
    client: ServiceClient,
) -> None:
    """A curve's 55 % that the turn's reading took down to 31 % (shared/reading.py): the
    inspector shows both, so an operator sees why the cheap answer lost."""
    corpus = {
        **hyp("smalltalk", 0.31),
        "routing": {
            "skill": "smalltalk",
            "kind": "corpus",
            "raw": 0.66,
            "chance": 0.55,
            "read": 0.08,
        },
    }
    (answer,) = choose(client, view("How far is the Moon?", hypotheses=[corpus, hyp("llm", 0.6)]))
    assert answer["index"] == 1
    assert answer["reason"].endswith(
        "it beat smalltalk: corpus, scored 0.66, curve 55 %, read 8 %, fits 31 %"
    )


def calibrated_hyp(skill: str, confidence: float, kind: str = "empathy") -> dict[str, Any]:
    return {**hyp(skill, confidence), "routing": {"skill": skill, "kind": kind, "raw": 0.7}}


def test_without_the_llm_a_weak_cheap_answer_gives_way_to_the_fallback(
    client: ServiceClient,
) -> None:
    """A cheap answer under the LLM's run_below is the LLM's turn; with no LLM to answer
    it, the fallback's honest line wins over a skill pretending to know."""
    (answer,) = choose(
        client,
        view(
            "yeah that's the part that stresses me out",
            hypotheses=[calibrated_hyp("smalltalk", 0.55), hyp("fallback", 0.1)],
        ),
    )
    assert answer["index"] == 1
    assert answer["reason"].startswith(
        "fallback won with score 0.10 (confidence 0.10) over 1 other hypothesis; "
        "penalised: smalltalk weak (-1.00)"
    )


def test_a_cheap_answer_from_the_selectors_floor_is_given(client: ServiceClient) -> None:
    """From 0.65, a little under the LLM's run_below: the knowledge skill's passage at
    0.6957 (its curve's chance for raw 0.74-0.89) answers a docs question without an LLM,
    where the fallback took it."""
    rotten, backup = choose(
        client,
        view("I feel rotten", hypotheses=[calibrated_hyp("smalltalk", 0.65), hyp("fallback", 0.1)]),
        view(
            "How do I restore a backup?",
            hypotheses=[hyp("fallback", 0.1), calibrated_hyp("knowledge", 0.6957, "passage")],
        ),
    )
    assert rotten == {
        "index": 0,
        "reason": "smalltalk had the highest confidence (0.65) of 2 hypotheses",
    }
    assert backup["index"] == 1


def test_among_weak_answers_alone_the_most_confident_answers(client: ServiceClient) -> None:
    (answer,) = choose(
        client,
        view("hm", hypotheses=[calibrated_hyp("faq", 0.52), calibrated_hyp("smalltalk", 0.57)]),
    )
    assert answer["index"] == 1


def test_a_bad_fallback_below_names_the_variable() -> None:
    assert fallback_below({}) == 0.65
    assert fallback_below({"SELECTOR_FALLBACK_BELOW": "0"}) == 0.0
    with pytest.raises(ConfigError, match="SELECTOR_FALLBACK_BELOW: 'high' is not a chance"):
        fallback_below({"SELECTOR_FALLBACK_BELOW": "high"})
