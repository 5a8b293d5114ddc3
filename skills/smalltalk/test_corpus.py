"""Retrieval from the open dialog corpus: what matches, what does not, and how it varies."""

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from agent.sdk.testing import ServiceClient, view
from shared import calibration
from skills.smalltalk import corpus
from skills.smalltalk.app import CORPUS, app
from skills.smalltalk.corpus import (
    CATEGORIES,
    THRESHOLD,
    CorpusIndex,
    content_words,
    load_entries,
    whole_text,
)

SMALL = """
categories: [test]
conversations:
- - Tell me a joke
  - Why did the chicken cross the road?
- - Tell me a joke
  - 42
- - How are you?
  - Fine.
  - Good to hear.
- - How old are you?
  - Old enough.
"""


def test_each_line_answers_the_one_before_and_statements_merge() -> None:
    entries = {e.statement: e.answers for e in load_entries([("test", SMALL)])}
    assert entries == {
        "Tell me a joke": ["Why did the chicken cross the road?", "42"],
        "How are you?": ["Fine."],
        "Fine.": ["Good to hear."],
        "How old are you?": ["Old enough."],
    }


def test_content_words_must_match_not_just_the_small_ones() -> None:
    index = CorpusIndex(load_entries([("test", SMALL)]))
    found = index.best("how are you")
    assert found is not None and found[0].statement == "How are you?"
    old = index.best("How old are you?")
    assert old is not None and old[0].statement == "How old are you?"
    assert index.best("How big are you?") is None
    assert index.best("?!") is None
    assert CORPUS.best("tell me about trains") is None
    assert CORPUS.best("What is 17 times 23?") is None


def test_a_text_asked_again_finds_what_it_found_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches are kept by text (and the oldest let go): asking again, after others or
    after the first answer was let go, finds the same statement."""
    monkeypatch.setattr(corpus, "BEST_KEPT", 2)
    index = CorpusIndex(load_entries([("test", SMALL)]))
    asked = ["how are you", "How old are you?", "How big are you?", "how are you"]
    found = [index.best(text) for text in [*asked, *reversed(asked)]]
    statements = [None if f is None else f[0].statement for f in found]
    assert statements == [
        "How are you?",
        "How old are you?",
        None,
        "How are you?",
        "How are you?",
        None,
        "How old are you?",
        "How are you?",
    ]


def test_the_installed_corpus_is_loaded_whole() -> None:
    categories = {e.category for e in CORPUS.entries}
    assert categories == set(CATEGORIES)
    assert len(CORPUS.entries) > 500
    found = CORPUS.best("Do you have feelings?")
    assert found is not None and found[1] >= THRESHOLD and found[0].category == "emotion"


@pytest.fixture(scope="module")
def client() -> Iterator[ServiceClient]:
    with ServiceClient(app) as client:
        yield client


def ask(client: ServiceClient, *dialogs: dict[str, Any]) -> list[list[dict[str, Any]]]:
    response = client.post("/respond", json={"dialogs": list(dialogs)})
    response.raise_for_status()
    answer: list[list[dict[str, Any]]] = response.json()
    return answer


@pytest.fixture
def uncalibrated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The skill's raw scores, no answer silenced (shared/calibration.py): what the corpus
    finds, whatever the dev set says such answers are worth."""
    monkeypatch.setenv(calibration.CALIBRATION_VARIABLE, "off")
    calibration._shipped.cache_clear()
    yield
    monkeypatch.undo()
    calibration._shipped.cache_clear()


@pytest.mark.usefixtures("uncalibrated")
def test_the_corpus_answers_what_its_statements_say(client: ServiceClient) -> None:
    (answer,) = ask(client, view("Are you happy?"))
    assert answer[0]["smalltalk_topic"] == "corpus"
    assert answer[0]["corpus_category"] in {"emotion", "botprofile", "ai"}


@pytest.mark.usefixtures("uncalibrated")
def test_a_statement_about_the_user_finds_no_question_about_the_bot(client: ServiceClient) -> None:
    """ "I'm bored" is close in words and meaning to "Are you bored?", whose answer tells of
    the bot's feelings; asked of the bot, it is still found."""
    assert corpus.spoken_of("I'm bored") == "speaker"
    assert corpus.spoken_of("Are you bored?") == "addressee"
    assert corpus.spoken_of("tell me a joke") is None  # "me" asks, it is no topic
    bored, asked = ask(client, view("I'm bored"), view("are you bored?"))
    assert not [h for h in bored if h["smalltalk_topic"] == "corpus"], bored
    assert asked[0]["smalltalk_topic"] == "corpus", asked
    assert asked[0]["corpus_statement"] == "Are you bored?"


def test_i_am_good_thanks_answers_how_are_you_not_thanks(client: ServiceClient) -> None:
    for text in ("I'm good, thanks", "Fine, thank you. And you?", "not bad"):
        (answer,) = ask(client, view("How are you?", "Pretty well! And you?", text))
        assert answer[0]["smalltalk_topic"] == "doing_well", text
    (thanks,) = ask(client, view("thanks!"))
    assert thanks[0]["smalltalk_topic"] == "thanks"


def test_the_persona_speaks_for_itself_before_the_corpus(client: ServiceClient) -> None:
    (how,) = ask(client, view("How are you?"))
    assert how[0]["smalltalk_topic"] == "how_are_you"
    (music,) = ask(client, view("Do you like music?"))
    assert music[0]["text"].startswith("My favourite music is")


@pytest.mark.parametrize(
    "text",
    [
        "Tell me a joke",
        "How old are you?",
        "Do you like movies?",
        "zzz qqq",
        "I'm bored, what's up?",
    ],
)
def test_query_weighting_matches_scikit_learn(text: str) -> None:
    """Fitted without scikit-learn, weighted without ``transform``: scikit-learn's cosines."""
    # scikit-learn imported here, not at the top: every pytest worker imports each test module
    # as it collects, and scikit-learn costs each about a second of CPU (docs/development.md).
    from sklearn.feature_extraction.text import TfidfVectorizer

    statements = [e.statement for e in CORPUS.entries]
    for view_, preprocessor in ((CORPUS.whole, whole_text), (CORPUS.content, content_words)):
        vectorizer = TfidfVectorizer(
            analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True, preprocessor=preprocessor
        )
        matrix = vectorizer.fit_transform(statements)
        expected = (matrix @ vectorizer.transform([text]).T).toarray().ravel()
        assert np.allclose(view_.similarities(text), expected)
