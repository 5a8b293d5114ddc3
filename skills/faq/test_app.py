"""The FAQ skill over real HTTP: paraphrases find their question, off-topic lines find none."""

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent.sdk.testing import ServiceClient, view
from shared import tfidf
from shared.calibration import raw_confidence
from skills.faq import app as faq_app
from skills.faq.app import (
    FAQ_FILE,
    INDEX,
    MAX_CONFIDENCE,
    MEANING_FLOOR,
    SIMILARITY_FLOOR,
    FaqIndex,
    answer,
    app,
    load_faq,
    normalise,
)


@pytest.fixture(scope="module")
def client() -> Iterator[ServiceClient]:
    """One client for the module: the skill keeps nothing between requests."""
    with ServiceClient(app) as client:
        yield client


def ask(client: ServiceClient, *texts: str) -> list[list[dict[str, object]]]:
    """One dialog per text, in one batch."""
    response = client.post("/respond", json={"dialogs": [view(text) for text in texts]})
    response.raise_for_status()
    answer: list[list[dict[str, object]]] = response.json()
    return answer


def test_paraphrases_find_their_question_in_order(client: ServiceClient) -> None:
    deleting, annotators = ask(client, "how can I delete my data", "what are annotators?")
    assert deleting[0]["faq_question"] == "How do I delete my data?"
    assert "DELETE /api/user/{user_id}" in str(deleting[0]["text"])
    assert annotators[0]["faq_question"] == "What is an annotator?"
    for (hypothesis,) in (deleting, annotators):
        # wording and meaning both close: their geometric mean, each over its floor
        assert MEANING_FLOOR <= raw_confidence(hypothesis) <= MAX_CONFIDENCE


def test_every_shipped_question_answers_itself_with_capped_confidence(
    client: ServiceClient,
) -> None:
    questions = [entry.question for entry in INDEX.entries]
    answers = ask(client, *questions)
    assert [a[0]["faq_question"] for a in answers] == questions
    assert {raw_confidence(a[0]) for a in answers} == {MAX_CONFIDENCE}
    assert [a[0]["text"] for a in answers] == [entry.answer for entry in INDEX.entries]


def test_a_question_asked_again_gets_the_answer_it_got_first(
    client: ServiceClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The closest question is kept by text (and the oldest let go): asked again, after
    others or after its search was let go, a question finds the same answer."""
    monkeypatch.setattr(faq_app, "BEST_KEPT", 2)
    monkeypatch.setattr(faq_app, "INDEX", FaqIndex(load_faq(FAQ_FILE)))
    asked = ["how can I delete my data", "what are annotators?", "what is love"]
    first = ask(client, *asked)
    again = ask(client, *reversed(asked), *asked)
    assert again == [*reversed(first), *first]
    assert first[0][0]["faq_question"] == "How do I delete my data?"
    assert first[2] == []


def test_stays_silent_off_topic(client: ServiceClient) -> None:
    assert ask(client, "what is love", "hi", "where are you from", "I like pizza", "") == [[]] * 5


def test_what_the_bot_can_do_is_answered_and_not_confused_with_small_talk(
    client: ServiceClient,
) -> None:
    can_do, for_me, exactly, book, sing, really_sing = ask(
        client,
        "What can you do?",
        "what can you do for me",
        "What exactly can you do?",
        "Can you recommend a good book?",
        "Can you sing?",
        "Can you really sing?",
    )
    assert can_do[0]["faq_question"] == for_me[0]["faq_question"] == "What can you do?"
    assert exactly[0]["faq_question"] == "What can you do?"  # emphasis asks nothing more
    assert "joke" in str(can_do[0]["text"])
    # "What can you do?" is all stop words: it shares "can you" with everything.
    assert book == sing == really_sing == []


def test_a_turn_the_annotator_reads_as_asking_what_the_bot_can_do_gets_that_entry(
    client: ServiceClient,
) -> None:
    """The intents annotator is sure these ask what the bot can do; a word of the user's own
    around it ("cool.", "exactly ... capable") kept the stop-word question from answering,
    and the rules send such a turn to the FAQ alone. The entries that name the intent
    (``intent`` in faq.json) answer it, calibrated apart; without the annotator's sure
    reading the same turns get nothing, and an unsure one (a task beside it, 0.6) too."""
    sure = {"intents": {"intent": "abilities", "confidence": 1.0, "method": "pattern"}}
    unsure = {"intents": {"intent": "abilities", "confidence": 0.6, "method": "pattern"}}
    texts = ["cool. what else can you do", "what exactly are you capable of?", "help"]
    dialogs = [view(text, annotations=sure) for text in texts]
    dialogs += [view(text) for text in texts]
    dialogs += [view("can you help me write a cover letter", annotations=unsure)]
    response = client.post("/respond", json={"dialogs": dialogs})
    response.raise_for_status()
    answers = response.json()
    for found in answers[:3]:
        assert found and found[0]["faq_question"] in ("What can you do?", "How can you help me?")
        assert found[0]["routing"]["kind"] == "retrieval_by_intent", found
    assert answers[3:] == [[], [], [], []]


def test_who_made_the_bot_in_any_words_gets_the_entry_naming_that_intent(
    client: ServiceClient,
) -> None:
    """ "who built u", "And who runs you, some company?" are far from "Who made you?" in
    characters; the annotator reads them as ``creator`` and that entry names it."""
    sure = {"intents": {"intent": "creator", "confidence": 1.0, "method": "pattern"}}
    texts = ["who built u", "And who runs you, some company?"]
    response = client.post("/respond", json={"dialogs": [view(t, annotations=sure) for t in texts]})
    response.raise_for_status()
    for found in response.json():
        assert found and found[0]["faq_question"] == "Who made you?", found


def test_a_faq_without_intents_answers_by_retrieval_alone(tmp_path: Path) -> None:
    """A deployment's own faq.json need not name intents: then no entry answers by the
    annotator's intent, and retrieval decides as before."""
    own = tmp_path / "faq.json"
    own.write_text('[{"question": "What can you do?", "answer": "Plenty."}]')
    index = FaqIndex(load_faq(own))
    assert index.best_of("cool. what else can you do", "abilities") is None


def test_health_and_bad_body(client: ServiceClient) -> None:
    health = client.get("/health").json()
    refused = client.post("/respond", json={"dialog": [view("hi")]})
    assert health == {"status": "ok", "service": "faq", "role": "skill"}
    assert refused.status_code == 422
    assert "dialogs" in refused.text


def test_a_broken_faq_file_is_refused_naming_the_field(tmp_path: Path) -> None:
    broken = tmp_path / "faq.json"
    broken.write_text('[{"question": "What is Chorus?"}]')
    with pytest.raises(ValidationError, match="answer"):
        load_faq(broken)
    broken.write_text("[]")
    with pytest.raises(ValueError, match="no entry"):
        load_faq(broken)


def test_the_shipped_file_is_valid() -> None:
    assert len(load_faq(FAQ_FILE)) >= 15


@pytest.mark.parametrize("text", ["How do I delete my data?", "what are annotators", "zzz", ""])
def test_query_weighting_matches_scikit_learn(text: str) -> None:
    """Fitted without scikit-learn, weighted without ``transform``: scikit-learn's cosines."""
    # scikit-learn imported here, not at the top: every pytest worker imports each test module
    # as it collects, and scikit-learn costs each about a second of CPU (docs/development.md).
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import linear_kernel

    vectorizer = TfidfVectorizer(
        analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True, preprocessor=normalise
    )
    questions = vectorizer.fit_transform([e.question for e in INDEX.entries])
    expected = linear_kernel(vectorizer.transform([text]), questions)[0]
    assert INDEX.similarities(text) == pytest.approx(expected)


def test_a_question_close_in_characters_but_not_in_meaning_gets_no_answer(
    client: ServiceClient,
) -> None:
    """ "Can you help me plan a weekend in Edinburgh?" shares most of its characters with
    "How can you help me?" and none of its meaning: the FAQ stays silent, and the LLM (or
    the fallback) answers."""
    plan, ours = ask(client, "can you help me plan a weekend in Edinburgh?", "how can you help me?")
    assert plan == []
    assert ours[0]["faq_question"] == "How can you help me?"


def test_the_stop_words_are_scikit_learns() -> None:
    """The copy read without importing scikit-learn is still its list."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert tfidf.ENGLISH_STOP_WORDS == ENGLISH_STOP_WORDS


def test_a_line_that_asks_nothing_gets_no_answer() -> None:
    """ "Goodnight, Chorus" shares the characters of "What is Chorus?", and asks nothing:
    no FAQ answer. The same name in a question, or a question without its question mark
    ("so what is chorus then"), is answered."""
    assert answer("Goodnight, Chorus") is None
    assert answer("evening chorus") is None
    asked, careless = answer("What is Chorus?"), answer("so what is chorus then")
    assert asked is not None and "orchestration" in asked.text
    assert careless is not None and careless.text == asked.text


def test_the_bots_name_said_to_it_is_not_asked_about(client: ServiceClient) -> None:
    """ "Hi Chorus, how's life?" shares the characters of "What is Chorus?", but the name
    is said to the bot there, not asked about: the FAQ reads the turn without it."""
    life, age, evening, what, can = ask(
        client,
        "Hi Chorus, how's life?",
        "how old are you, chorus?",
        "evening chorus, you good?",
        "What is Chorus?",
        "Chorus, what can you do?",
    )
    assert life == age == evening == []
    assert what[0]["faq_question"] == "What is Chorus?"
    assert can[0]["faq_question"] == "What can you do?"


def test_a_newcomers_questions_about_what_chorus_offers_find_their_entries(
    client: ServiceClient,
) -> None:
    """What people ask before they adopt a bot platform (its channels, its database, its
    chart, how long it keeps conversations, ratings, the hardware it needs, its price)
    has entries of its own: without them
    these questions got nothing from the FAQ and went to the LLM, or to the fallback."""
    asked = {
        "does chorus support telegram?": "Does Chorus work with Telegram?",
        "is there a helm chart?": "Is there a Helm chart for Kubernetes?",
        "how long do you keep the conversations?": "How long are conversations kept?",
        "which database does it use?": "Which database does Chorus use?",
        "can people rate the bot's answers?": "Can users rate the answers?",
        "Does it need a GPU?": "What hardware does Chorus need? Do I need a GPU?",
        "is chorus free?": "Is Chorus free to use?",
    }
    answers = ask(client, *asked)
    assert [found[0]["faq_question"] if found else None for found in answers] == list(
        asked.values()
    )
    assert "chorus telegram" in str(answers[0][0]["text"])


def test_a_question_near_in_meaning_needs_less_of_the_wording(client: ServiceClient) -> None:
    """The wording's cosine depends on the file (each entry weighs every n-gram anew):
    "which port is chorus on?" is 0.50 from "What port does Chorus listen on?" in
    characters and 0.85 in meaning, and is answered, the two's geometric mean over
    THRESHOLD. A line as near in wording and far in meaning ("how do I run a marathon?",
    0.52 from "How do I run Chorus?", 0.49 in meaning) is not."""
    port, marathon, sum_ = ask(
        client, "which port is chorus on?", "how do I run a marathon?", "what is 17 times 23?"
    )
    assert port[0]["faq_question"] == "What port does Chorus listen on?"
    assert SIMILARITY_FLOOR <= raw_confidence(port[0]) < MAX_CONFIDENCE
    assert marathon == sum_ == []


def test_a_paraphrase_far_in_characters_and_near_in_meaning_finds_its_entry(
    client: ServiceClient,
) -> None:
    """A question in other words than its entry's can fall under 0.5 in wording while
    its meaning is close: it is answered, and the answer does not open on a "Yes" that
    only the entry's own question asks for."""
    wording = "which languages can skills be written in?"
    found = INDEX.best(wording)
    assert found is not None
    entry, similarity, close = found
    assert SIMILARITY_FLOOR <= similarity < 0.5 and close >= MEANING_FLOOR
    (hypothesis,) = ask(client, wording)[0]
    assert hypothesis["faq_question"] == entry.question
    assert "any other language" in str(hypothesis["text"])
    assert not str(hypothesis["text"]).startswith("Yes")


def test_the_faqs_own_words_are_kept_as_typed(client: ServiceClient) -> None:
    """The English dictionary knows no "helpdesk" nor "dialogs", and careless typing's
    correction read them as "helpless" and "dialog": the FAQ keeps the words it writes
    itself, as the retrieval annotator keeps the knowledge base's."""
    assert INDEX.knows("helpdesk") and INDEX.knows("Dialogs") and not INDEX.knows("helpless")
    helpdesk, kept = ask(
        client, "does chorus hand chats to a helpdesk?", "where are my dialogs kept?"
    )
    assert (
        helpdesk[0]["faq_question"]
        == "Can Chorus hand conversations to our helpdesk, like Zendesk?"
    )
    assert kept[0]["faq_question"] == "Where are my dialogs stored?"


#: What an answer may name that a reader would look for: a page or file of the repository,
#: and a setting.
_PATH = re.compile(r"\b(?:docs|deploy)/[\w./-]*\w|(?<![\w/.-])[\w.-]+\.(?:yml|md)\b")
_SETTING = re.compile(r"\b(?:CHORUS|LLM|KNOWLEDGE)_[A-Z_]*[A-Z]\b")


def test_every_page_and_setting_an_answer_names_exists() -> None:
    """An answer that sends the user to a page, a file or a setting that is not there
    (renamed, never written) is worse than none: each is checked against the checkout and
    the settings' reference."""
    root = Path(__file__).resolve().parents[2]
    reference = (root / "docs" / "configuration.md").read_text(encoding="utf-8")
    named = [(e.question, found) for e in INDEX.entries for found in _PATH.findall(e.answer)]
    missing = [
        (question, path)
        for question, path in named
        if not (root / path).exists()
        and not (root / "docs" / path).exists()
        and not any(root.glob(f"**/{path}"))
    ]
    settings = [(e.question, s) for e in INDEX.entries for s in _SETTING.findall(e.answer)]
    undocumented = [(question, s) for question, s in settings if s not in reference]
    assert len(named) >= 15 and len(settings) >= 8
    assert missing == [] and undocumented == []
