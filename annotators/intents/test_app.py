"""The intent catcher over real HTTP, and its data file's validation."""

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent.sdk.testing import ServiceClient, view
from annotators.intents import app as intents_app
from annotators.intents.app import (
    CATCHER,
    INTENTS_FILE,
    SIMILARITY_THRESHOLD,
    BadIntentsFile,
    FittedTfidf,
    IntentsFile,
    app,
    load,
)
from shared.tfidf import Tfidf


def classify(*texts: str) -> list[dict[str, Any]]:
    """One single-utterance dialog per text, in one batch."""
    with ServiceClient(app) as client:
        answer: list[dict[str, Any]] = client.post(
            "/respond", json={"dialogs": [view(t) for t in texts]}
        ).json()
    return answer


def test_patterns_catch_the_listed_intents_in_batch_order() -> None:
    texts = [
        "Hello!",
        "ok bye then",
        "Thanks a lot",
        "how are you doing?",
        "My name is Ann",
        "what\u2019s my name?",
        "Are you a robot?",
        "What can you do?",
        "yes please",
        "nope",
    ]
    answer = classify(*texts)
    assert [a["intent"] for a in answer] == [
        "greeting",
        "farewell",
        "thanks",
        "how_are_you",
        "tell_name",
        "ask_name",
        "bot_identity",
        "abilities",
        "yes",
        "no",
    ]
    assert {(a["confidence"], a["method"]) for a in answer} == {(1.0, "pattern")}


def test_the_longest_pattern_match_wins() -> None:
    answer = classify("hi, how are you?", "of course not", "no, thank you")
    assert [a["intent"] for a in answer] == ["how_are_you", "no", "no"]


def test_the_bot_asked_about_as_whoever_is_at_the_other_end_is_bot_identity() -> None:
    """People check who or what they are chatting with in the third person ("is this a
    real person typing?", "who am I talking to") and by the names of other bots; a
    question about someone else is no such check."""
    found = [
        (a["intent"], a["method"])
        for a in classify(
            "are you chatgpt",
            "r u chatgpt or something",
            "Is this a real person typing?",
            "so who exactly am I talking to",
            "whos on the other end of this",
            "Is there a person reading this?",
            "can u hear me ok",
            "who is this",
        )
    ]
    assert found == [("bot_identity", "pattern")] * 8
    other = classify("who is this guy", "is there a person who can fix my boiler near me")
    assert [a["intent"] for a in other] == [None, None]


def test_goodbyes_after_a_clause_and_in_other_words_are_farewells() -> None:
    said = [
        "aight im out, later",
        "right off to cook, night!",
        "Right, second half starting. Ta-ra",
        "Right, I'll try it after supper. Cheerio dear.",
        "later dude",
        "peace",
    ]
    assert [a["intent"] for a in classify(*said)] == ["farewell"] * len(said)
    not_yet = classify("maybe later", "im off work today")
    assert [a["intent"] for a in not_yet] == [None, None]


def test_openings_typed_loosely_greet_with_their_usual_company() -> None:
    """A greeting stretched or in its dialect spelling ("hii bot", "hallo there bot", "evening
    chorus") is a greeting; what comes with it asks how the bot is ("what's good", "hows
    things") or whether it is there ("you awake?", "is this working"), which is no
    question of its own."""
    found = [
        (a["intent"], a["confidence"], a.get("also", []))
        for a in classify(
            "hii bot",
            "hallo there bot",
            "evening chorus, hows things",
            "yo whats good",
            "Hey bot, you awake?",
            "Hello, is this working",
        )
    ]
    assert found == [
        ("greeting", 1.0, []),
        ("greeting", 1.0, []),
        ("how_are_you", 1.0, ["greeting"]),
        ("how_are_you", 1.0, ["greeting"]),
        ("bot_identity", 1.0, ["greeting"]),
        ("bot_identity", 1.0, ["greeting"]),
    ]
    elsewhere = classify("evening classes are hard", "how is life in japan", "hill walking is fun")
    assert [a["intent"] for a in elsewhere] == [None, None, None]


def test_how_the_bot_is_asked_in_everyday_words() -> None:
    """ "how ru", "how's your evening going?", "having a good day?" and "you good?" ask how
    the bot is; "you good at maths?" asks something else."""
    asked = classify(
        "how ru", "how's your evening going?", "having a good day?", "evening chorus, you good?"
    )
    assert [a["intent"] for a in asked] == ["how_are_you"] * 4
    assert classify("you good at maths?")[0]["intent"] != "how_are_you"


def later(text: str) -> dict[str, Any]:
    """The annotation of ``text`` said after the bot's first line (not an opening turn)."""
    with ServiceClient(app) as client:
        (answer,) = client.post(
            "/respond", json={"dialogs": [view("hello", "Hi! What's your name?", text)]}
        ).json()
    found: dict[str, Any] = answer
    return found


def test_the_other_intents_a_pattern_found_are_named_too() -> None:
    """ "hi, how are you?" is how_are_you, and a greeting as well: the skills of both may
    answer it. A turn with one intent's pattern only names no other."""
    (both,) = classify("hi, how are you?")
    assert (both["intent"], both["also"]) == ("how_are_you", ["greeting"])
    assert "also" not in later("how are you?")


def test_asking_how_the_bot_is_first_greets() -> None:
    """A conversation opened by asking how the bot is ("sup", "how's your day been?")
    is greeted: the greeting's script opens, as for "hi, how are you?"; later in the
    conversation the same question is only how_are_you."""
    first, sup, hiya = classify("how are you doing?", "sup", "hiya chorus, how's your day been?")
    assert (first["intent"], first["also"]) == ("how_are_you", ["greeting"])
    assert (sup["intent"], sup["also"]) == ("how_are_you", ["greeting"])
    # a greeting whose rest asks how the bot is: no question of its own
    assert (hiya["intent"], hiya["confidence"], hiya["also"]) == ("how_are_you", 1.0, ["greeting"])
    assert later("how are you doing?")["intent"] == "how_are_you"
    assert "also" not in later("how are you doing?")


def test_a_paraphrase_no_pattern_covers_is_caught_by_similarity() -> None:
    text = "what sort of things are you able to help me with"
    assert CATCHER.by_pattern(text) is None  # a premise, else this tests the patterns
    (answer,) = classify(text)
    assert answer["intent"] == "abilities"
    assert answer["method"] == "similarity"
    assert SIMILARITY_THRESHOLD <= answer["confidence"] < 1.0


def test_how_the_user_is_is_no_question_of_how_the_bot_is_however_alike() -> None:
    """ "I feel down today" is 0.67 like "how do you feel today?": read as how_are_you,
    small talk told the user how the bot was. A statement of one's own state is no
    question to the bot; asked, or said to "you", it still is one."""
    told, great, asked, doing = (
        later(text)
        for text in ("I feel down today", "i feel great today", "doing well?", "how you doing")
    )
    assert told["intent"] is None and told["nearest"] == "how_are_you", told
    assert told["likeness"] >= SIMILARITY_THRESHOLD  # as like it as before, for the reading
    assert great["intent"] is None, great
    assert asked["intent"] == doing["intent"] == "how_are_you", (asked, doing)


def test_unrelated_text_has_no_intent_but_reports_its_best_similarity() -> None:
    answer = classify("The train to Berlin leaves at noon.", "")
    assert answer[0]["intent"] is None and answer[0]["method"] is None
    assert 0.0 < answer[0]["confidence"] < SIMILARITY_THRESHOLD
    assert answer[1] == {
        "intent": None,
        "confidence": 0.0,
        "method": None,
        "nearest": None,
        "likeness": 0.0,
    }


def test_chat_shorthand_for_leaving_is_a_goodbye() -> None:
    """ "gtg" (got to go) is a goodbye as "ttyl" is; small talk nodded to "ok gtg"."""
    answer = classify("ok gtg", "g2g!", "gtg bye")
    assert [a["intent"] for a in answer] == ["farewell", "farewell", "farewell"]


def test_a_reading_under_the_threshold_still_names_the_intent_it_is_most_like() -> None:
    """ "later!" is no sure farewell, but it is most like one: a skill may answer such a
    reading as sure as its calibration found them (the greeting does, answer type
    greet_by_likeness); a pattern's reading names none."""
    (later, hello) = classify("later!", "hello")
    assert later["intent"] is None and later["nearest"] == "farewell"
    assert 0.0 < later["likeness"] == later["confidence"] < SIMILARITY_THRESHOLD
    assert hello["method"] == "pattern" and hello["nearest"] is None


def test_classifies_only_the_newest_utterance() -> None:
    with ServiceClient(app) as client:
        answer = client.post(
            "/respond",
            json={"dialogs": [view("hello", "Hi! What's your name?", "thank you")]},
        ).json()
    assert answer[0]["intent"] == "thanks"


def test_the_turn_is_read_for_the_skills_with_the_bots_last_line() -> None:
    """The reading (shared/reading.py) every skill's confidence takes: a hello is the
    greeting's, a feeling small talk's, a question of fact the LLM's alone, and a reply to
    the bot's own question about films small talk's (label rule 6 of
    bench/data/routing/README.md; read so since the fit on train2, whose replies to small
    talk's film question are many)."""
    texts = [
        view("Hello there!"),
        view("I feel a bit down today"),
        # "Who painted The Night Watch?" reads 0.39 greeting, 0.21 LLM since the fit on
        # train2 (whose 97 conversations all open with a greeting): a weak reading, which
        # only weighs answers, and no cheap skill answers it
        view("What is the capital of France?"),
        view("hi", "Which film did you like best this year?", "Oppenheimer"),
    ]
    with ServiceClient(app) as client:
        answers = client.post("/respond", json={"dialogs": texts}).json()
    likeliest = [max(a["reading"], key=a["reading"].get) for a in answers]
    assert likeliest == ["greeting", "smalltalk", "llm", "smalltalk"]
    assert set(answers[0]["reading"]) == {"faq", "greeting", "knowledge", "smalltalk", "llm"}
    assert answers[0]["reading"]["greeting"] > 0.9


def test_a_greeting_or_a_plea_for_help_beside_a_task_of_its_own_is_not_sure() -> None:
    """ "hi, can you help me write a cover letter?" asks for a task, not what the bot can
    do; "sup, should i get an iphone or a samsung" a question beside "how are you" that is
    not about the bot: under the floor, no script takes them. Help with nothing named, and
    a question about the bot beside a greeting, are still sure."""
    task, hello_task, sup, plain, about_bot = classify(
        "hi, can you help me write a cover letter?",
        "hello chorus, can you recommend a podcast for a long drive",
        "sup, should i get an iphone or a samsung",
        "hi, can you help me?",
        "hi, how are you? what's your favourite film?",
    )
    assert (task["intent"], task["confidence"]) == ("abilities", 0.6)
    assert (hello_task["intent"], hello_task["confidence"]) == ("greeting", 0.6)
    assert (sup["intent"], sup["confidence"]) == ("how_are_you", 0.6)
    assert (plain["intent"], plain["confidence"]) == ("abilities", 1.0)
    assert (about_bot["intent"], about_bot["confidence"]) == ("how_are_you", 1.0)


def reply_after(line: str, skill: str) -> dict[str, Any]:
    """A dialog where ``skill`` said ``line`` after a hello, and the user replies to it."""
    built = view("hi", line, "we were together four years")
    built["utterances"][1]["active_skill"] = skill
    return built


def test_the_llms_line_is_read_by_its_kind_not_its_words() -> None:
    """After an LLM answer the reading is the same whatever the LLM said (the training
    sets, run without an LLM, hold the fallback's words there): a user carrying on its
    thread reads as carrying on the LLM's; after a cheap skill's question the reply reads
    otherwise."""

    dialogs = [
        reply_after("Breakups are hard, and it is normal to miss them.", "llm"),
        reply_after("Heat pumps move heat rather than make it. Want to know more?", "llm"),
        reply_after("Do you have a hobby?", "smalltalk"),
    ]
    with ServiceClient(app) as client:
        first, second, cheap = (
            a["reading"] for a in client.post("/respond", json={"dialogs": dialogs}).json()
        )
    assert first == second
    assert first != cheap


def test_the_fallbacks_lines_read_alike_whichever_was_picked() -> None:
    """The fallback picks one of its lines at random, some asking, some not: the turn after
    it is read the same after any of them (it read two ways, and a cheap answer at the
    selector's edge was given in one run and not the next). After a cheap skill's line,
    whether it asked still counts."""

    dialogs = [
        reply_after(
            "I don't know, sorry. Is there something else you'd like to talk about?", "fallback"
        ),
        reply_after(
            "That one stumps me. Try asking me about myself, or what Chorus is.", "fallback"
        ),
        reply_after("I'm listening. What happened next?", "fallback"),
        reply_after("Do you have a hobby?", "smalltalk"),
        reply_after("Do you have a hobby.", "smalltalk"),
    ]
    with ServiceClient(app) as client:
        read = [a["reading"] for a in client.post("/respond", json={"dialogs": dialogs}).json()]
    asking, telling, listening, cheap_asking, cheap_telling = read
    assert asking == telling == listening
    assert cheap_asking != cheap_telling


def test_health() -> None:
    with ServiceClient(app) as client:
        health = client.get("/health").json()
    assert health == {"status": "ok", "service": "intents", "role": "annotator"}


def test_bad_input_is_refused_with_a_message() -> None:
    bad = view("hi")
    del bad["utterances"][0]["text"]
    with ServiceClient(app) as client:
        response = client.post("/respond", json={"dialogs": [bad]})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "text"


def test_the_shipped_file_has_8_to_15_examples_per_reference_intent() -> None:
    """The intents the reference services rely on; a deployment may add its own."""
    intents = IntentsFile.model_validate_json(INTENTS_FILE.read_bytes()).root
    reference = {
        "greeting",
        "farewell",
        "thanks",
        "how_are_you",
        "tell_name",
        "ask_name",
        "bot_identity",
        "abilities",
        "yes",
        "no",
    }
    assert reference <= set(intents)
    assert all(8 <= len(intents[name].examples) <= 15 for name in reference)


@pytest.mark.parametrize(
    ("intents", "place"),
    [
        ({"greeting": {"patterns": ["(hi"], "examples": ["hi"]}}, "greeting.patterns"),
        ({"greeting": {"patterns": ["hi"]}}, "greeting.examples"),
        ({"greeting": {"patterns": [], "examples": []}}, "greeting.examples"),
    ],
)
def test_a_bad_data_file_is_refused_naming_the_intent_and_field(
    tmp_path: Path, intents: dict[str, Any], place: str
) -> None:
    path = tmp_path / "intents.json"
    path.write_text(json.dumps(intents))
    with pytest.raises(BadIntentsFile, match=place):
        load(path)


def test_questions_about_other_things_are_no_intent_however_alike_their_words() -> None:
    """Wording alone read these as how_are_you, bot_identity or abilities, and the bot
    answered "How old are you?" with "I'm doing great, thanks for asking!"."""
    texts = [
        "Have you ever been to Japan?",
        "How old are you?",
        "What kind of music do you like?",
        "Do you have any pets?",
        "Have you seen any good movies lately?",
        "Do you know any facts about space?",
    ]
    assert [answer["intent"] for answer in classify(*texts)] == [None] * len(texts)


def test_the_bots_name_is_no_greeting() -> None:
    """A question naming the bot is not like a greeting for the name's sake ("who maintains
    chorus?"), nor a greeting beside it sure ("hi. what is a tier in chorus?"): no example
    of a greeting holds the bot's name."""
    named, greeted = classify("who maintains chorus?", "hi. what is a tier in chorus?")
    assert named["intent"] != "greeting"
    assert greeted["intent"] == "greeting"
    assert greeted["confidence"] < 0.7


@pytest.mark.parametrize(
    "settings",
    [
        {"analyzer": "word", "ngram_range": (1, 2), "token_pattern": r"(?u)\b\w+\b"},
        {"analyzer": "char_wb", "ngram_range": (2, 4)},
    ],
    ids=["word", "char"],
)
@pytest.mark.parametrize("dense_most", [intents_app.DENSE_MOST, 0], ids=["dense", "compressed"])
def test_the_wording_similarity_is_scikit_learns(
    settings: dict[str, Any], dense_most: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fitted without scikit-learn and the utterance weighted without ``transform``: the
    cosines must be scikit-learn's own, repeated words, unknown words and text with no
    known n-gram included, whether the fit's rows are kept dense or compressed (as the
    other languages' greetings are: :data:`DENSE_MOST`)."""
    monkeypatch.setattr(intents_app, "DENSE_MOST", dense_most)
    # scikit-learn imported here, not at the top: every pytest worker imports each test module
    # as it collects, and scikit-learn costs each about a second of CPU (docs/development.md).
    from sklearn.feature_extraction.text import TfidfVectorizer

    intents = IntentsFile.model_validate_json(INTENTS_FILE.read_bytes()).root
    examples = [e for spec in intents.values() for e in spec.examples]
    vectorizer = TfidfVectorizer(sublinear_tf=True, **settings)
    matrix = vectorizer.fit_transform(examples)
    fitted = FittedTfidf(Tfidf(examples, **settings))
    texts = [
        "Explain why the sky is blue.",
        "hello hello HELLO, how are you you you?",
        "zxqv wprt",
        "!!!",
        "",
        "what\u2019s your name",
    ]
    for text in texts:
        expected = (vectorizer.transform([text]) @ matrix.T).toarray()[0]
        assert np.allclose(fitted.cosines(text), expected, rtol=0, atol=1e-12), text


def test_a_pattern_that_leaves_a_question_unexplained_is_not_sure() -> None:
    """A greeting, a goodbye or thanks inside a question of its own scores under the
    skill selector's and the skills' floor (0.7); "good to see you" greets."""
    answers = classify(
        "Hey, good to see you",
        "hiii there",
        "Name's Oskar",
        "Hi, what's a good name for a bakery?",
        "How do I say goodbye in French?",
        "hi, whats a good name for a bakery",
        "thanks, what a day",
        "hi, is Lisbon or Porto better for a first trip",
        "hi! does anyone read this",
        "yo recommend me a show",
        "hi. can this answer questions from our own documentation",
        "hi my son needs help with fractions",
        "hey there chorus",
    )
    assert [(a["intent"], a["confidence"]) for a in answers] == [
        ("greeting", 1.0),
        ("greeting", 1.0),
        ("tell_name", 1.0),
        ("greeting", 0.6),
        ("farewell", 0.6),
        ("greeting", 0.6),  # the question without its question mark is still one
        ("thanks", 1.0),  # "what a day" exclaims
        ("greeting", 0.6),  # a yes-or-no question of its own, its mark dropped too
        ("greeting", 1.0),  # whether anyone is there: a greeting's company
        ("greeting", 0.6),  # a bid opening the rest
        ("greeting", 0.6),  # a modal before "this", the product asked about
        ("greeting", 0.6),  # a need of help told for someone else
        ("greeting", 1.0),
    ]


@pytest.mark.parametrize(
    ("careless", "careful"),
    [
        ("whats ur name", "What's your name?"),
        ("thnaks a lot", "Thanks a lot!"),
        ("waht can u do", "What can you do?"),
        ("how r u", "How are you?"),
        ("thx", "Thank you"),
    ],
)
def test_careless_typing_is_read_like_the_careful_phrasing(careless: str, careful: str) -> None:
    """Chat spelling is read the careful way before the patterns and examples see it
    (shared/spelling.py), so the intent does not depend on apostrophes or typos."""
    typed, written = classify(careless, careful)
    assert typed["intent"] == written["intent"] is not None
    assert typed["confidence"] >= 0.9


def test_an_opening_in_another_language_is_a_greeting_from_the_corpus() -> None:
    """The corpus's greetings in other languages (annotators/intents/languages.py) read a
    conversation's opening turn no English intent knows; later in a conversation "ciao"
    mostly says goodbye, and is left alone, as is an English opening no intent reads."""
    hola, jonas, tudo, moon = classify(
        "Hola", "Hallo! Ich bin Jonas", "oi, tudo bom?", "how far away is the moon"
    )
    assert [hola["intent"], jonas["intent"], tudo["intent"]] == ["greeting"] * 3
    assert hola["method"] == "similarity" and hola["confidence"] == 1.0
    assert moon["intent"] is None
    with ServiceClient(app) as client:
        (later,) = client.post(
            "/respond", json={"dialogs": [view("hi", "Hi! I'm Chorus. What's your name?", "ciao")]}
        ).json()
    assert later["intent"] != "greeting"


def test_a_short_opening_turn_nothing_reads_is_a_greeting() -> None:
    """People open a first conversation by greeting, in any language and spelling: a
    short opening turn no intent reads is a greeting (method ``opening``); one near
    another intent, one that asks or bids, and a later turn are not."""
    konnichiwa, helo, later, what, joke = classify(
        "konnichiwa!", "helo", "later!", "what is chorus", "joke please"
    )
    assert [konnichiwa["intent"], helo["intent"]] == ["greeting", "greeting"]
    assert konnichiwa["method"] == "opening" and konnichiwa["confidence"] == 0.7
    assert later["intent"] is None and later["nearest"] == "farewell"
    assert what["method"] != "opening" and joke["intent"] is None
    # nothing to thank for yet: an opener only like a thank-you in words greets
    assert [a["intent"] for a in classify("oi mate", "g'day mate")] == ["greeting", "greeting"]
    # the bot addressed as "robot" is no question about what it is
    robot, asked = classify("shalom robot", "are you a robot")
    assert (robot["intent"], asked["intent"]) == ("greeting", "bot_identity")
    computer, store = classify("HELLO IS THIS THE COMPUTER", "is this the computer store?")
    assert (computer["intent"], computer.get("also")) == ("bot_identity", ["greeting"])
    assert store["intent"] != "bot_identity"
    with ServiceClient(app) as client:
        (again,) = client.post(
            "/respond",
            json={"dialogs": [view("hi", "Hi! I'm Chorus. What's your name?", "konnichiwa!")]},
        ).json()
    assert again["method"] != "opening"


def test_a_greeting_with_a_question_or_a_want_of_its_own_further_in_is_not_sure() -> None:
    """A greeting whose rest asks about the product after a clause break ("quick q - do you
    ship a helm chart", "..., can chorus run it"), says a want of something to do ("I'd
    like to add our company FAQ to the bot"), or asks the bot's view of a subject ("do you
    think AI can be conscious?", like "are you an AI" in its words) is the question's:
    under the floor. A greeting's usual company and a greeting with a statement stay sure."""
    answers = classify(
        "hi chorus quick q - do you ship a helm chart",
        "hello, we run a dp-agent pipeline, can chorus run it",
        "Hello! I'd like to add our company FAQ to the bot",
        "hi! quick one, do you think AI can be conscious?",
        "hi, how are you?",
        "hello, is anybody there?",
        "hi, are you a bot?",
        "hey chorus, who made you?",
        "hi im the best man at my brothers wedding and i'm bricking it",
    )
    assert [(a["intent"], a["confidence"], a.get("also", [])) for a in answers] == [
        ("greeting", 0.6, []),
        ("greeting", 0.6, []),
        ("greeting", 0.6, []),
        ("greeting", 0.6, []),
        ("how_are_you", 1.0, ["greeting"]),
        ("greeting", 1.0, []),
        ("bot_identity", 1.0, ["greeting"]),
        ("creator", 1.0, ["greeting"]),
        ("greeting", 1.0, []),
    ]


def test_who_made_the_bot_is_its_own_intent() -> None:
    """Who made, built, owns or runs the bot is asked in many words, and the FAQ has the
    answer: its own intent (``creator``), which the FAQ's entry names. Who made a thing of
    the user's is not."""
    answers = classify(
        "who built you then?",
        "who programmed u",
        "And who runs you, some company?",
        "nice. whos behind this project anyway",
        "which company made you?",
        "who made this cake",
        "who are you",
    )
    intents = [(a["intent"], a["confidence"]) for a in answers]
    assert intents[:5] == [("creator", 1.0)] * 5, intents
    assert [i for i, _ in intents[5:]] == [None, "bot_identity"], intents


def test_a_greeting_named_in_a_question_later_on_is_no_greeting() -> None:
    """ "how do you say good morning properly" after the opening names a greeting: no
    intent (its likeness kept, as for any reading under the floor), where the same words
    opening a conversation, or a greeting opening a later turn and asking after it, greet."""
    later = [
        view("hi", "Hi! I'm Chorus. What's your name?", text)
        for text in (
            "how do you say good morning properly",
            "what about good morning",
            "morning again, you there?",
        )
    ]
    with ServiceClient(app) as client:
        named, about, again, opening = client.post(
            "/respond", json={"dialogs": [*later, view("olá, tudo bem?")]}
        ).json()
    for answer in (named, about):
        assert answer["intent"] is None
        assert answer["nearest"] == "greeting" and answer["likeness"] > SIMILARITY_THRESHOLD
    assert again["intent"] == "greeting"
    assert opening["intent"] == "greeting"
