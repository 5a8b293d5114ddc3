"""The sentiment annotator over real HTTP."""

from typing import Any

from agent.sdk.testing import ServiceClient, view
from annotators.sentiment.app import app, as_vader_should_read


def test_labels_each_dialog_in_order() -> None:
    with ServiceClient(app) as client:
        answer = client.post(
            "/respond",
            json={
                "dialogs": [
                    view("I love this, thank you!"),
                    view("I HATE trains!!!"),
                    view("The train leaves at noon."),
                ]
            },
        ).json()
    assert [a["label"] for a in answer] == ["positive", "negative", "neutral"]
    assert answer[0]["compound"] > 0.5 > answer[0]["negative"]
    assert answer[1]["compound"] < -0.5
    assert answer[2] == {
        "label": "neutral",
        "compound": 0.0,
        "positive": 0.0,
        "neutral": 1.0,
        "negative": 0.0,
    }


def test_scores_only_the_newest_utterance() -> None:
    with ServiceClient(app) as client:
        answer = client.post(
            "/respond",
            json={"dialogs": [view("This is awful.", "Sorry to hear that.", "Now it is great!")]},
        ).json()
    assert answer[0]["label"] == "positive"


def test_negation_flips_the_label() -> None:
    with ServiceClient(app) as client:
        answer = client.post(
            "/respond",
            json={"dialogs": [view("this is good"), view("this is not good at all")]},
        ).json()
    assert [a["label"] for a in answer] == ["positive", "negative"]


def scored(texts: list[str]) -> list[dict[str, Any]]:
    """The annotator's answer for each text, as the newest utterance of its own dialog."""
    with ServiceClient(app) as client:
        answer: list[dict[str, Any]] = client.post(
            "/respond", json={"dialogs": [view(t) for t in texts]}
        ).json()
    return answer


def test_a_word_typed_as_an_intensifier_strengthens_the_next_one() -> None:
    """ "pretty", "super", "damn" are feelings of their own in VADER's lexicon; before a
    feeling word they only say how much of it there is."""
    texts = [
        "I'm pretty anxious about my exam",
        "pretty bad day honestly",
        "SUPER tired",
        "damn good coffee",
        "she looks pretty",
        "a pretty dress",
    ]
    answer = scored(texts)
    labels = [a["label"] for a in answer]
    assert labels == ["negative", "negative", "negative", "positive", "positive", "positive"]
    assert answer[3]["compound"] > 0.4  # VADER alone: +0.05, "damn" counted against it


def test_saying_how_one_feels_is_read_by_the_mood_not_by_the_word_feeling() -> None:
    """VADER scores "feeling" as good news and knows no "down" or "blue": "im feeling
    kinda down today" read as positive and small talk answered "That's great to hear!"."""
    texts = [
        "im feeling kinda down today",
        "Feeling blue tonight",
        "I FEEL DOWN",
        "im feeling great",
        "how are you feeling?",
        "the price went down",
    ]
    labels = [a["label"] for a in scored(texts)]
    assert labels == ["negative", "negative", "negative", "positive", "neutral", "neutral"]


def test_a_word_of_stance_says_how_frankly_not_how_one_feels() -> None:
    """VADER scores "honestly" and "truly" as good news: "honestly a bit lonely so far" read
    as positive and small talk smiled at it. Before a feeling word they strengthen it."""
    texts = [
        "honestly a bit lonely so far",
        "Honestly, the food was great",
        "truly awful day",
        "honestly just got home",
    ]
    answer = scored(texts)
    assert [a["label"] for a in answer] == ["negative", "positive", "negative", "neutral"]
    assert answer[2]["compound"] < -0.5  # "truly" read as "really": VADER alone, -0.03
    # after an intensifier read as "really", which is longer than "crazy" or "super"
    assert as_vader_should_read("super tired and honestly sad") == "really tired and really sad"


def test_health() -> None:
    with ServiceClient(app) as client:
        health = client.get("/health").json()
    assert health == {"status": "ok", "service": "sentiment", "role": "annotator"}


def test_bad_input_is_refused_with_a_message() -> None:
    with ServiceClient(app) as client:
        response = client.post("/respond", json={"dialog": [view("hi")]})
    assert response.status_code == 422
    assert "dialogs" in response.text
