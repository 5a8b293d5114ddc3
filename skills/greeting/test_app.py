"""The greeting skill: its whole script lives in the human attributes it returns."""

from typing import Any

import pytest

from agent.sdk.testing import ServiceClient, view
from shared.calibration import SILENT_BELOW, chance, curve_of
from skills.greeting.app import TOPIC_QUESTION, WHY_ASK_LINE, app, extract_name


def ask(
    *texts: str, annotations: dict[str, Any] | None = None, **attributes: object
) -> list[dict[str, Any]]:
    dialog = view(*texts, human_attributes=attributes, annotations=annotations)
    with ServiceClient(app) as client:
        answer = client.post("/respond", json={"dialogs": [dialog]}).json()
    result: list[dict[str, Any]] = answer[0]
    return result


def test_greets_and_asks_the_name() -> None:
    (hypothesis,) = ask("Hello!")
    assert hypothesis["text"] == "Hi! I'm Chorus. What's your name?"
    assert hypothesis["human_attributes"] == {"greeting_stage": "asked_name"}


def test_takes_a_bare_name_after_asking() -> None:
    (hypothesis,) = ask("Hello!", "What's your name?", "ann", greeting_stage="asked_name")
    assert hypothesis["human_attributes"] == {"name": "Ann", "greeting_stage": "done"}


def test_uses_the_remembered_name() -> None:
    assert ask("what is my name?", name="Ann")[0]["text"] == "Your name is Ann."
    assert ask("hi", name="Ann")[0]["text"] == "Hello again, Ann!"


def test_a_question_on_someone_elses_name_is_not_the_users_name_recalled() -> None:
    """ "what did i say her name was" (the cat's) is like "what did i say my name was" to
    the intents annotator's examples; "Your name is Ann." answers neither the question
    nor the user."""
    similar = {"intents": {"intent": "ask_name", "confidence": 0.82, "method": "similarity"}}
    cat = ask("what did i say her name was lol", annotations=similar, name="Ann")
    assert cat == []
    own = ask("what did i say my name was", annotations=similar, name="Ann")
    assert own[0]["text"] == "Your name is Ann."


def test_stays_silent_off_script() -> None:
    assert ask("tell me about trains", name="Ann", greeting_stage="done") == []


def test_name_extraction() -> None:
    assert extract_name("my name is bob", bare_word_ok=False) == "Bob"
    assert extract_name("I'm fine", bare_word_ok=False) is None
    assert extract_name("just browsing", bare_word_ok=True) is None
    assert extract_name("Eve", bare_word_ok=True) == "Eve"


def test_a_name_in_words_the_skill_does_not_read_is_the_first_name_in_the_reply() -> None:
    """After the name question, a short reply in another language or with more to say
    gives the first name in it (faker's first names of 85 locales), not a place."""
    assert extract_name("mi chiamo Giulia 😊", bare_word_ok=True) == "Giulia"
    assert extract_name("ik ben Sanne", bare_word_ok=True) == "Sanne"
    assert extract_name("I'm Ahmed from Leicester", bare_word_ok=True) == "Ahmed"
    assert extract_name("just Eve", bare_word_ok=True) == "Eve"
    assert extract_name("I live in Paris", bare_word_ok=True) is None
    assert extract_name("Will do", bare_word_ok=True) is None
    # only where the name was asked for
    assert extract_name("mi chiamo Giulia", bare_word_ok=False) is None


def test_a_name_said_in_passing_ends_its_clause_with_btw_or_from() -> None:
    """Unasked, "I'm Josh btw", "oh I'm Nadia by the way" and "I'm Elsa from Stockholm"
    give the name; "I'm back from work" and "I'm tired btw" do not."""
    assert extract_name("I'm Josh btw", bare_word_ok=False) == "Josh"
    assert extract_name("oh I'm Nadia by the way", bare_word_ok=False) == "Nadia"
    assert extract_name("I'm Elsa from Stockholm", bare_word_ok=False) == "Elsa"
    assert extract_name("im back from work", bare_word_ok=True) is None
    assert extract_name("I'm tired btw", bare_word_ok=False) is None


@pytest.mark.parametrize(
    "text",
    [
        "I'm feeling sad",
        "I'm feeling a bit sad today",
        "I'm from Berlin",
        "I'm Back from the shops",
        "I'm good",
        "I'm 25",
        "i'm tired",
        "I am so happy",
        "It's raining",
        "This is great",
        "I'm good, and you?",
        "I'm a teacher",
        "Im fine thanks",
    ],
)
def test_what_is_not_a_name(text: str) -> None:
    assert extract_name(text, bare_word_ok=False) is None
    assert ask(text) == []


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("I'm Maria", "Maria"),
        ("Hi, I'm Maria!", "Maria"),
        ("hello, my name is maria", "Maria"),
        ("call me Jo", "Jo"),
        ("This is Ann.", "Ann"),
        ("I am Zoë, nice to meet you", "Zoë"),
    ],
)
def test_a_name_given_is_remembered(text: str, name: str) -> None:
    (hypothesis,) = ask(text)
    assert hypothesis["human_attributes"] == {"name": name, "greeting_stage": "done"}


def test_a_known_name_changes_only_when_the_user_says_so() -> None:
    for text in ("I'm feeling a bit sad today", "I'm Tired", "I'm Paul", "It's Monday"):
        assert ask(text, name="Maria", greeting_stage="done") == [], text
    for text, name in (("Actually, my name is Paul", "Paul"), ("please call me Mo", "Mo")):
        (hypothesis,) = ask(text, name="Maria", greeting_stage="done")
        assert hypothesis["human_attributes"]["name"] == name
        assert hypothesis["text"] == f"Nice to meet you, {name}!"


def test_after_asking_a_lowercase_introduction_is_a_name() -> None:
    (hypothesis,) = ask("Hello!", "What's your name?", "i'm maria", greeting_stage="asked_name")
    assert hypothesis["human_attributes"] == {"name": "Maria", "greeting_stage": "done"}
    assert ask("Hello!", "What's your name?", "I'm good", greeting_stage="asked_name") == []


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("im Oskar", "Nice to meet you, Oskar!"),
        # a greeting that gives the name opens the conversation: greeted by the name
        (
            "hey im Oskar",
            "Hi Oskar, nice to meet you! I'm Chorus. What would you like to talk about?",
        ),
        ("Im Oskar", "Nice to meet you, Oskar!"),
        ("u can call me Oskar", "Nice to meet you, Oskar!"),
    ],
)
def test_a_name_typed_carelessly_is_remembered_as_typed(text: str, answer: str) -> None:
    """ "im", "u" read as "I'm", "you" (shared/spelling.py); the name is the one
    the user typed, never a spelling correction of it."""
    (hypothesis,) = ask(text)
    assert hypothesis["human_attributes"] == {"name": "Oskar", "greeting_stage": "done"}
    assert hypothesis["text"] == answer


def test_a_lowercase_name_after_asking_is_not_spelling_corrected() -> None:
    """ "oskar" is not in the dictionary ("oscar" is): the name said back is still Oskar."""
    (hypothesis,) = ask("Hello!", "What's your name?", "im oskar", greeting_stage="asked_name")
    assert hypothesis["human_attributes"] == {"name": "Oskar", "greeting_stage": "done"}


def test_why_do_you_ask_typed_carelessly_is_read_as_the_question() -> None:
    (hypothesis,) = ask("Hello!", "What's your name?", "why do u ask", greeting_stage="asked_name")
    (careful,) = ask("Hello!", "What's your name?", "Why do you ask?", greeting_stage="asked_name")
    assert hypothesis["text"] == careful["text"]


def test_a_batch_answers_each_dialog_in_order() -> None:
    with ServiceClient(app) as client:
        answer = client.post(
            "/respond",
            json={
                "dialogs": [
                    view("what is my name?", human_attributes={"name": "Ann"}),
                    view("Hello!"),
                    view("tell me about trains", human_attributes={"greeting_stage": "done"}),
                ]
            },
        ).json()
    assert [[h["text"] for h in hypotheses] for hypotheses in answer] == [
        ["Your name is Ann."],
        ["Hi! I'm Chorus. What's your name?"],
        [],
    ]


def test_health_and_bad_body() -> None:
    with ServiceClient(app) as client:
        health = client.get("/health").json()
        refused = client.post("/respond", json={"dialogs": [{"utterances": 3}]})
    assert health == {"status": "ok", "service": "greeting", "role": "skill"}
    assert refused.status_code == 422
    assert "utterances" in refused.text


ASKED = ("Hello!", "Hi! I'm Chorus. What's your name?")


@pytest.mark.parametrize(
    "reply",
    [
        "Thanks!",
        "thank you",
        "Cool",
        "Wow!",
        "Nope",
        "Why?",
        "ok",
        "Sure",
        "lol",
        "Hello",
        "Bye",
        "Later",
        "Whatever",
        "Nothing",
        "Really?",
        "Ann?",
        "Great!",
        "Yes",
        "Pass",
        "Oops",
        "Right",
        "over here",  # words that place, not a name before "here"
        "that's my name",
    ],
)
def test_a_reply_to_the_question_that_is_no_name_is_not_taken_for_one(reply: str) -> None:
    answers = ask(*ASKED, reply, greeting_stage="asked_name")
    assert not [a for a in answers if "name" in a["human_attributes"]], answers
    assert not [a for a in answers if "meet you" in a["text"]], answers  # "Hello" is asked again
    assert extract_name(reply, bare_word_ok=True) is None


@pytest.mark.parametrize(
    ("reply", "name"),
    [
        ("Ann", "Ann"),
        ("marta", "Marta"),
        ("Zoë.", "Zoë"),
        ("I'm Marta.", "Marta"),
        ("i'm bob", "Bob"),
        ("Call me Bob", "Bob"),
        ("It's Ann", "Ann"),
        ("Siobhán!", "Siobhán"),
        ("Mia", "Mia"),  # "mia" (missing in action) is slang in VADER's lexicon: a name here
        ("Grace", "Grace"),
        ("Call me Mia", "Mia"),
        ("My name is Joy", "Joy"),  # a word of feeling, but said to be the name
        ("Marta here", "Marta"),  # a word that only places the name
        ("Yusuf here", "Yusuf"),
        ("I'm Callum then", "Callum"),
        ("Ingrid's my name", "Ingrid"),
        ("it's Lucas 😊", "Lucas"),  # an emoji ends the clause as a stop does
        ("oh it's Sandra, sorry, should have said", "Sandra"),
    ],
)
def test_a_name_given_in_reply_to_the_question_is_taken(reply: str, name: str) -> None:
    (hypothesis,) = ask(*ASKED, reply, greeting_stage="asked_name")
    assert hypothesis["human_attributes"] == {"name": name, "greeting_stage": "done"}
    assert hypothesis["text"].startswith(f"Nice to meet you, {name}!")


@pytest.mark.parametrize(
    ("reply", "name"),
    [
        ("Haruto desu", "Haruto"),  # a name no first-name list holds, opening the reply
        ("Jógvan. From Klaksvík, up north", "Jógvan"),
        ("mera naam Sunil hai", "Sunil"),  # ... or further into it, capitalised
        ("igama lami ngu Thandi", "Thandi"),
        ("Ines from Porto", "Ines"),  # a first name, then where the user is from
        ("Sam (she/her)", "Sam"),
        ("Mr. Patel", "Patel"),  # the word after a title
    ],
)
def test_a_name_the_lists_lack_is_a_capitalised_word_no_english_dictionary_holds(
    reply: str, name: str
) -> None:
    (hypothesis,) = ask(*ASKED, reply, greeting_stage="asked_name")
    assert hypothesis["human_attributes"] == {"name": name, "greeting_stage": "done"}


@pytest.mark.parametrize(
    "reply",
    [
        "Pfft, whatever",
        "Tbh I forget",
        "Idk man",
        "Kinda busy rn",
        "I live in Kyoto",
        "Haha fair enough. Mine's been busy",
    ],
)
def test_a_sound_an_abbreviation_or_a_place_after_asking_is_no_name(reply: str) -> None:
    assert extract_name(reply, bare_word_ok=True) is None


def test_a_reply_the_intents_annotator_reads_as_something_else_is_no_name() -> None:
    thanks = {"intents": {"intent": "thanks", "confidence": 0.9, "method": "similarity"}}
    assert ask(*ASKED, "Cheerio", annotations=thanks, greeting_stage="asked_name") == []
    # an unsure guess, or the annotator's own tell_name, does not stop a name
    unsure = {"intents": {"intent": "thanks", "confidence": 0.5, "method": "similarity"}}
    telling = {"intents": {"intent": "tell_name", "confidence": 0.68, "method": "similarity"}}
    for annotations in (unsure, telling):
        (hypothesis,) = ask(*ASKED, "Maria", annotations=annotations, greeting_stage="asked_name")
        assert hypothesis["human_attributes"]["name"] == "Maria"


def test_once_the_bot_has_moved_on_a_bare_word_is_no_name() -> None:
    # "Thanks!" left the question unanswered; the bot said something else since.
    assert ask("Thanks!", "You're welcome!", "Pizza", greeting_stage="asked_name") == []
    (hypothesis,) = ask("Thanks!", "You're welcome!", "My name is Ann", greeting_stage="asked_name")
    assert hypothesis["human_attributes"]["name"] == "Ann"


def test_call_me_later_is_no_name() -> None:
    assert ask("Call me later") == []
    assert extract_name("you can call me crazy", bare_word_ok=True) is None


def greeted_as(intent: str, confidence: float = 1.0) -> dict[str, Any]:
    return {"intents": {"intent": intent, "confidence": confidence, "method": "pattern"}}


def test_the_intents_annotators_reading_of_a_greeting_is_the_skills() -> None:
    """ "Hiya!" is a greeting to the annotator, so to the skill; a greeting the annotator
    saw a question beyond ("Hi, what's a good name for a bakery?") is not the script's."""
    (hiya,) = ask("Hiya!", annotations=greeted_as("greeting"))
    assert hiya["text"] == "Hi! I'm Chorus. What's your name?"
    assert hiya["routing"] == {"skill": "greeting", "kind": "greet", "raw": 0.9}
    assert (
        ask("Hi, what's a good name for a bakery?", annotations=greeted_as("greeting", 0.6)) == []
    )
    assert ask("Hey, good to see you", annotations=greeted_as("farewell")) == []


def test_a_greeting_that_also_asks_how_the_bot_is_gets_the_greeting() -> None:
    """ "Hi, how's it going?" is how_are_you to the annotator, which found a greeting too
    (``also``): a greeting is the greeting's whatever the turn also holds, so the script
    opens; the same question without a greeting is small talk's alone."""
    asked = {"intents": {**greeted_as("how_are_you")["intents"], "also": ["greeting"]}}
    (hypothesis,) = ask("Hi, how's it going?", annotations=asked)
    assert hypothesis["text"] == "Hi! I'm doing well, thanks. I'm Chorus. What's your name?"
    assert hypothesis["routing"]["kind"] == "greet"
    assert ask("how's it going?", annotations=greeted_as("how_are_you")) == []
    # a greeting beside a question of its own is no sure intent: not the script's
    unsure = {"intents": {**greeted_as("greeting", 0.6)["intents"], "also": ["greeting"]}}
    assert ask("Hi, what's a good name for a bakery?", annotations=unsure) == []


def test_a_greeting_read_by_likeness_is_as_sure_as_its_calibrated_reading() -> None:
    """ "evening!" is like the annotator's greeting examples without matching one, and
    "sorry, forgot to say hi" is most like them though not sure enough to be one: the
    script greets as sure as such readings fitted (shared/calibration.json), and a reading
    that fitted under half the time is silence."""

    def liked(confidence: float) -> dict[str, Any]:
        return {"intents": {"intent": "greeting", "confidence": confidence, "method": "similarity"}}

    def nearest(likeness: float) -> dict[str, Any]:
        reading = {"intent": None, "confidence": likeness, "method": None}
        return {"intents": {**reading, "nearest": "greeting", "likeness": likeness}}

    assert curve_of("greeting", "greet_by_likeness") is not None
    (evening,) = ask("evening!", annotations=liked(0.68))
    assert evening["text"] == "Hi! I'm Chorus. What's your name?"
    assert evening["confidence"] == chance("greeting", "greet_by_likeness", 0.68)
    assert evening["routing"] == {"skill": "greeting", "kind": "greet_by_likeness", "raw": 0.68}
    (sorry,) = ask("sorry, forgot to say hi", annotations=nearest(0.68))
    assert sorry["routing"] == {"skill": "greeting", "kind": "greet_by_likeness", "raw": 0.68}
    assert chance("greeting", "greet_by_likeness", 0.45) < SILENT_BELOW
    assert ask("is there a way to run it in Kubernetes?", annotations=nearest(0.45)) == []
    # a likeness under the floor is no reading, whatever the curve says
    assert ask("what's on tonight?", annotations=nearest(0.3)) == []


def test_names_given_as_names_and_the_question_why_after_asking() -> None:
    (oskar,) = ask("Name's Oskar")
    assert oskar["human_attributes"] == {"name": "Oskar", "greeting_stage": "done"}
    for said, name in (("I go by Lu", "Lu"), ("It's Dana here", "Dana")):
        (given,) = ask(said)
        assert given["human_attributes"] == {"name": name, "greeting_stage": "done"}, said
    assert ask("I go by bus") == []  # a name after "go by" is capitalised
    (robert,) = ask("my name is Robert'); DROP TABLE users;--")  # no quote in the name
    assert robert["human_attributes"]["name"] == "Robert"
    assert not [
        h
        for h in ask("I'm Dr. Okafor, I run the platform team")
        if "name" in h.get("human_attributes", {}) and h["human_attributes"]["name"] == "Dr"
    ]
    (initial,) = ask("you can call me J")  # an initial for a name
    assert initial["human_attributes"] == {"name": "J", "greeting_stage": "done"}
    assert not extract_name("call me a taxi", bare_word_ok=True)
    (jess,) = ask("ok fine its Jess")  # after a word that opens the reply
    assert jess["human_attributes"] == {"name": "Jess", "greeting_stage": "done"}
    for dodge in (
        "Why do you ask?",
        "why do you want to know?",
        "guess",
        "why do u need my name",
        "ok, I'd rather not share it",
        "I'll pass on the name, thanks",
        "not telling u lol",
        "Rather not, it's a work account",
        "I'd prefer to stay anonymous for now",
        "dont really want to say",
        "do i have to say",
    ):
        (why,) = ask(
            "Hello!", "Hi! I'm Chorus. What's your name?", dodge, greeting_stage="asked_name"
        )
        assert why["text"].startswith("Just so I know what to call you."), dodge
        assert why["human_attributes"] == {"greeting_stage": "done"}


def test_the_name_asked_back_gets_the_bots_and_the_question_again() -> None:
    """ "whats yours", "you tell me yours first": the user will trade names. The bot says
    its own and asks again, and the script still waits for the name, which the next
    reply gives ("fine. dave": a first name after a word of assent, in any case)."""
    for back in ("whats yours", "you tell me yours first", "whats ur name first", "and yours?"):
        (asked,) = ask(
            "Hello!", "Hi! I'm Chorus. What's your name?", back, greeting_stage="asked_name"
        )
        assert asked["text"] == "I'm Chorus! And what's your name?", back
        assert "greeting_stage" not in asked.get("human_attributes", {}), back
    (dave,) = ask(
        "Hello!",
        "Hi! I'm Chorus. What's your name?",
        "whats yours",
        "I'm Chorus! And what's your name?",
        "fine. dave",
        greeting_stage="asked_name",
    )
    assert dave["human_attributes"] == {"name": "Dave", "greeting_stage": "done"}


def test_a_name_after_a_word_of_assent_a_laugh_or_an_emoji_is_taken() -> None:
    for said, name in (
        ("good. marcus", "Marcus"),
        ("oh sorry, Priya", "Priya"),
        ("lol its tash", "Tash"),
        ("its ellie lol", "Ellie"),
        ("Beth 🙂", "Beth"),
    ):
        (given,) = ask(
            "Hello!", "Hi! I'm Chorus. What's your name?", said, greeting_stage="asked_name"
        )
        assert given["human_attributes"] == {"name": name, "greeting_stage": "done"}, said
    tired = ask(
        "Hello!", "Hi! I'm Chorus. What's your name?", "good. tired", greeting_stage="asked_name"
    )
    assert not [h for h in tired if "name" in h.get("human_attributes", {})], tired


def test_a_reply_that_declines_the_name_is_as_sure_as_its_way_of_declining() -> None:
    """Asking why says what it is; a short question back ("is that important?") is a
    guess, and one with only "you" in it ("are you alive?") a weaker one, which its
    calibrated chance leaves unsaid: the question is as often about the bot."""
    raws = {}
    for dodge in ("Why do you ask?", "guess", "Is that important?"):
        (why,) = ask(
            "Hello!", "Hi! I'm Chorus. What's your name?", dodge, greeting_stage="asked_name"
        )
        assert why["routing"]["kind"] == "why_ask", dodge
        raws[dodge] = why["routing"]["raw"]
    assert raws["Why do you ask?"] > raws["guess"] > raws["Is that important?"]
    assert chance("greeting", "why_ask", raws["Why do you ask?"]) >= chance(
        "greeting", "why_ask", raws["Is that important?"]
    )
    alive = ask(
        "Hello!", "Hi! I'm Chorus. What's your name?", "are you alive?", greeting_stage="asked_name"
    )
    assert not [h for h in alive if h["routing"]["kind"] == "why_ask"]


def test_names_typed_without_apostrophes_or_capitals_where_a_name_is_invited() -> None:
    """ "names oskar" is "name's Oskar"; after the bot asked, or said why it asked, "its
    marcus", "ha, fair. im viktor" and "i go by lu" give a name in any case; elsewhere a
    lowercase word after "its" is none ("its raining")."""
    (oskar,) = ask(*ASKED, "names oskar", greeting_stage="asked_name")
    assert oskar["human_attributes"] == {"name": "Oskar", "greeting_stage": "done"}
    (lu,) = ask(*ASKED, "i go by lu", greeting_stage="asked_name")
    assert lu["human_attributes"]["name"] == "Lu"
    explained = (
        *ASKED,
        "why?",
        "Just so I know what to call you. You don't have to tell me, though.",
    )
    for reply, name in (("fine, its Marcus", "Marcus"), ("ha, fair. im viktor", "Viktor")):
        (given,) = ask(*explained, reply, greeting_stage="done")
        assert given["human_attributes"] == {"name": name, "greeting_stage": "done"}, reply
    assert ask(*explained, "why though?", greeting_stage="done") == []  # explained once
    assert ask("Hello!", "Nice to meet you!", "its raining", greeting_stage="done") == []
    assert ask("its Marcus") != []  # capitalised after "its", as after "it's"


def test_the_turns_reading_weighs_the_answer_and_raises_it_only_when_sure() -> None:
    """The intents annotator's reading of the turn (shared/reading.py): one that finds the
    greeting unlikely takes its confidence down, one surer of it than the curve raises it
    (to the reading's own probability at most), an unsure one never raises it; the
    hypothesis keeps the curve's chance and the reading for the inspector."""

    def read(greeting: float) -> dict[str, Any]:
        intents = {"intent": "greeting", "confidence": 1.0, "method": "pattern"}
        return {"intents": {**intents, "reading": {"greeting": greeting, "llm": 0.1}}}

    (plain,) = ask("Hello!")
    (against,) = ask("Hello!", annotations=read(0.1))
    (sure,) = ask("Hello!", annotations=read(0.999))
    (unsure,) = ask("Hello!", annotations=read(0.5))
    assert against["confidence"] < plain["confidence"] < sure["confidence"] <= 0.999
    assert unsure["confidence"] <= plain["confidence"]
    assert against["routing"]["chance"] == plain["confidence"]
    assert against["routing"]["read"] == 0.1
    assert "read" not in plain["routing"]


def test_how_the_user_is_asked_back_does_not_decline_the_name() -> None:
    """ "gut, danke! and you?" right after the name question says how the user is and asks
    how the bot is (small talk's to answer), not why the bot asked; "why?" still does."""
    asked = ("hi", "Hi! I'm Chorus. What's your name?")
    assert ask(*asked, "gut, danke! and you?", greeting_stage="asked_name") == []
    (why,) = ask(*asked, "why?", greeting_stage="asked_name")
    assert why["text"] == WHY_ASK_LINE


def test_a_short_opening_turn_read_only_as_short_is_greeted_as_its_own_kind() -> None:
    """The intents annotator's ``opening`` reading ("konnichiwa!"): the script's first
    line, calibrated as an answer type of its own."""
    opening = {"intents": {"intent": "greeting", "confidence": 0.7, "method": "opening"}}
    (hello,) = ask("konnichiwa!", annotations=opening)
    assert hello["text"] == "Hi! I'm Chorus. What's your name?"
    assert hello["routing"]["kind"] == "greet_opening"


@pytest.mark.parametrize(
    ("opening", "name"),
    [
        ("ciao! mi chiamo Giulia", "Giulia"),
        ("hola soy Marta", "Marta"),
        ("hi im ravi", "Ravi"),
        ("Hallo! Ich bin Jonas", "Jonas"),
    ],
)
def test_a_greeting_that_gives_the_name_in_any_language_is_greeted_by_it(
    opening: str, name: str
) -> None:
    """The opening turn greets and says who greets: the bot greets by that name and does
    not ask it again."""
    greeting = {"intents": {"intent": "greeting", "confidence": 1.0, "method": "pattern"}}
    (hello,) = ask(opening, annotations=greeting)
    assert hello["text"].startswith(f"Hi {name}, nice to meet you!")
    assert "name?" not in hello["text"]
    assert hello["human_attributes"] == {"name": name, "greeting_stage": "done"}
    assert hello["routing"]["kind"] == "greet_named"


def test_a_greeting_to_someone_is_no_name() -> None:
    """The word right after the greeting is who it is for ("Hi Anna"), and later in the
    conversation a greeting with a name in it opens no such reading."""
    greeting = {"intents": {"intent": "greeting", "confidence": 1.0, "method": "pattern"}}
    (hello,) = ask("Hi Anna", annotations=greeting)
    assert hello["text"] == "Hi! I'm Chorus. What's your name?"
    later = ask("hi", "Hello!", "hola soy Marta", annotations=greeting, greeting_stage="done")
    assert all("Marta" not in h["text"] for h in later)


def test_a_name_kept_back_after_the_bot_said_why_it_asked_is_let_go() -> None:
    """ "ok, I'd rather not share it" after the explanation: the bot lets the name go
    instead of explaining again, and takes none."""
    explained = ("hi", WHY_ASK_LINE)
    (kept,) = ask(*explained, "ok, I'd rather not share it", greeting_stage="done")
    assert kept["text"].startswith("That's fine, no name needed.")
    assert kept["human_attributes"] == {}
    assert kept["routing"]["kind"] == "name_let_go"


def replied(text: str, greeting: float = 0.95, said_by: str = "greeting") -> dict[str, Any]:
    """A dialog where ``text`` replies to the name question ``said_by`` asked, which the
    turn's reading gives to the greeting with probability ``greeting`` and the intents
    annotator reads as no intent."""
    reading = {"greeting": greeting, "smalltalk": 0.05, "llm": 0.02}
    intents = {"intent": None, "confidence": 0.1, "method": None}
    near = {"nearest": "tell_name", "likeness": 0.2, "reading": reading}
    dialog = view(
        "hi",
        "Hi! I'm Chorus. What's your name?",
        text,
        human_attributes={"greeting_stage": "asked_name"},
        annotations={"intents": {**intents, **near}},
    )
    dialog["utterances"][-2]["active_skill"] = said_by
    return dialog


def test_a_reply_to_the_name_question_the_reading_is_sure_of_is_the_greetings() -> None:
    """Right after the script asked the name, a reply none of its patterns reads is the
    greeting's when the turn's reading is sure of it (shared/reading.py's
    ``REPLIES_BY_READING``), as sure as the reading: the first name in it is taken
    ("oskar is the name": a first name in lowercase, which no pattern takes; "mera naam
    Sunil hai" is read without the reading, a capitalised word no English dictionary holds),
    or, with none, the bot says why it asks ("not really in the mood for names"). An
    unsure reading, another skill's question, "I'm bored" (how the user is) and a reply
    asking how the bot is back get nothing from the greeting."""

    dialogs = [
        replied("oskar is the name"),
        replied("mera naam Sunil hai"),
        replied("not really in the mood for names"),
        replied("oskar is the name", greeting=0.8),
        replied("oskar is the name", said_by="smalltalk"),
        replied("I'm bored"),
        replied("jól, köszi. you?"),
    ]
    with ServiceClient(app) as client:
        answers = client.post("/respond", json={"dialogs": dialogs}).json()
    (oskar,), (sunil,), (dodged,), *silent = answers
    assert oskar["text"].startswith("Nice to meet you, Oskar!")
    assert oskar["human_attributes"] == {"name": "Oskar", "greeting_stage": "done"}
    assert oskar["confidence"] == 0.95
    assert oskar["routing"]["kind"] == "by_reading"
    assert sunil["human_attributes"]["name"] == "Sunil"
    assert dodged["text"] == WHY_ASK_LINE
    assert dodged["human_attributes"] == {"greeting_stage": "done"}
    assert silent == [[], [], [], []]


def test_after_how_are_you_a_reply_with_no_name_is_not_the_greetings_by_reading() -> None:
    """ "hi how are you" got the name question with the script's "I'm doing well"; "im ok i
    guess" then says how the user is, which small talk answers: the greeting says no
    "Just so I know what to call you" there, though the reading finds it the greeting's.
    A name in such a reply is still taken."""
    asked_how = {"intents": {"intent": "how_are_you", "confidence": 1.0, "method": "pattern"}}
    dialogs = [replied("ok i guess"), replied("ok i guess"), replied("oskar is the name")]
    for dialog in dialogs[1:]:
        dialog["utterances"][0]["annotations"] = asked_how
    with ServiceClient(app) as client:
        plain, how, named = client.post("/respond", json={"dialogs": dialogs}).json()
    assert [h["text"] for h in plain] == [WHY_ASK_LINE]
    assert how == []
    assert named[0]["human_attributes"]["name"] == "Oskar"


def test_a_reply_to_the_name_question_is_read_for_the_name_it_gives_or_how_the_user_is() -> None:
    """Replies to the name question that the reading gives the greeting: a name opening a
    longer introduction, in any alphabet ("Rūta, I make amber jewellery in the old town",
    "Sipho. night guard at a mall ..."), is taken where the bot used to answer "Just so I
    know what to call you"; "My name is Mr. Adeyemi" gives "Adeyemi", not the title nor
    "My" (a first name in some lists); "im bob ross" gives "Bob", a first name that is an
    English word too, after "I'm"; and "I'm pretty anxious about my exam" says how the
    user is, no name, so the greeting leaves it to small talk or the LLM, where it used
    to say why it asks."""
    dialogs = [
        replied("Rūta, I make amber jewellery in the old town"),
        replied("Sipho. night guard at a mall in joburg, dead quiet in here"),
        replied("My name is Mr. Adeyemi"),
        replied("im bob ross"),
        replied("I'm pretty anxious about my exam"),
        replied("im so tired today"),
        replied("im not gonna tell u my name"),
    ]
    with ServiceClient(app) as client:
        answers = client.post("/respond", json={"dialogs": dialogs}).json()
    ruta, sipho, adeyemi, bob, anxious, tired, dodged = answers
    assert [a[0]["human_attributes"].get("name") for a in (ruta, sipho, adeyemi, bob)] == [
        "Rūta",
        "Sipho",
        "Adeyemi",
        "Bob",
    ]
    assert ruta[0]["text"] == f"Nice to meet you, Rūta! {TOPIC_QUESTION}"
    assert anxious == [] and tired == []
    assert [h["text"] for h in dodged] == [WHY_ASK_LINE]


def test_an_opening_turn_the_reading_is_sure_of_opens_the_script() -> None:
    """ "heyo bot" opens a conversation: no pattern of the script reads it, and the
    intents annotator reads no intent in it (its "bot" is nearest the bot-identity
    examples). When the turn's reading is sure it is the greeting's
    (shared/reading.py's ``OPENS_BY_READING``), the script opens as for "Hi", as sure as
    the reading, and a name in it is greeted ("ola, sou a Inês"). An unsure reading, a
    greeting read in part with a question of its own, and the same words later in a
    conversation get nothing from the greeting."""

    def opened(
        text: str, greeting: float = 0.85, intent: str | None = None, later: bool = False
    ) -> dict[str, Any]:
        reading = {"greeting": greeting, "smalltalk": 0.05, "llm": 0.05}
        intents = {"intent": intent, "confidence": 0.6 if intent else 0.45, "method": None}
        near = {"nearest": None if intent else "bot_identity", "likeness": 0.45}
        texts = ("hi", "Hi! I'm Chorus. What's your name?", "Ann", "Nice to meet you, Ann!")
        return view(
            *(texts if later else ()),
            text,
            human_attributes={"name": "Ann", "greeting_stage": "done"} if later else {},
            annotations={"intents": {**intents, **near, "reading": reading}},
        )

    dialogs = [
        opened("heyo bot"),
        opened("ola, sou a Inês"),
        opened("heyo bot", greeting=0.6),
        opened("hi, what's a good name for a bakery?", intent="greeting"),
        opened("heyo bot", later=True),
        # a question of its own beside the greeting, however sure the reading
        opened("morning! what's the capital of australia", greeting=0.9),
    ]
    with ServiceClient(app) as client:
        answers = client.post("/respond", json={"dialogs": dialogs}).json()
    (heyo,), (ines,), *silent = answers
    assert heyo["text"] == "Hi! I'm Chorus. What's your name?"
    assert heyo["human_attributes"] == {"greeting_stage": "asked_name"}
    assert heyo["confidence"] == 0.85
    assert heyo["routing"]["kind"] == "by_reading"
    assert ines["text"].startswith("Hi Inês, nice to meet you!")
    assert ines["human_attributes"] == {"name": "Inês", "greeting_stage": "done"}
    assert silent == [[], [], [], []]


@pytest.mark.parametrize(
    ("reply", "raw"),
    [
        ("does it matter", 0.8),
        ("how come you need it", 0.65),  # "how come" asks why
        ("why does a bot need a name", 0.8),
        ("what do you need my name for", 0.8),
        ("do i need to say it", 0.65),
        ("none of ur business", 0.7),
        ("Nope, not yet", 0.7),
    ],
)
def test_a_question_back_or_a_refusal_is_read_by_its_shape(reply: str, raw: float) -> None:
    """Right after the name question, a short reply with no name that asks back with few
    words of its own, or refuses (a negation, a word that puts the question off), is
    answered with why the bot asks, its raw score saying which shape it has."""
    (answer,) = ask("hi", "Hi! I'm Chorus. What's your name?", reply, greeting_stage="asked_name")
    assert answer["text"] == WHY_ASK_LINE
    assert answer["routing"] == {"skill": "greeting", "kind": "declined_by_shape", "raw": raw}
    assert answer["human_attributes"] == {"greeting_stage": "done"}


@pytest.mark.parametrize(
    "reply",
    [
        "oskar is the name",
        "gut, danke! and you?",
        "what should I get my sister for her 30th?",
        "not great to be honest",
        "where do the operators see it",  # a question of place: about the world
        "How do I back it up?",  # of manner
        "can I deploy it on kubernetes?",  # of what one can do
    ],
)
def test_a_name_how_the_user_is_or_a_question_of_its_own_is_no_refusal(reply: str) -> None:
    """A name in the reply, how the user is asked back, or a question with words of its
    own about something else does not decline the name question."""
    found = ask("hi", "Hi! I'm Chorus. What's your name?", reply, greeting_stage="asked_name")
    assert all(h["text"] != WHY_ASK_LINE for h in found)


@pytest.mark.parametrize(
    "reply",
    [
        "chillin",
        "IM SO HAPPY I PASSED MY DRIVING TEST",
        "how much fuel a Bajaj Boxer uses for 100km",
    ],
)
def test_a_reply_that_does_not_read_as_a_name_is_none(reply: str) -> None:
    """After the name question, a lowercase verb with its final "g" dropped, a line in
    capitals (where a capital marks nothing) and a question (whatever capitalised make of
    motorbike it names) give no name; a short nickname does."""
    found = ask("hi", "Hi! I'm Chorus. What's your name?", reply, greeting_stage="asked_name")
    assert all("name" not in h["human_attributes"] for h in found)
    (kev,) = ask("hi", "Hi! I'm Chorus. What's your name?", "kev", greeting_stage="asked_name")
    assert kev["human_attributes"]["name"] == "Kev"


@pytest.mark.parametrize(
    ("line", "name"),
    [("Brenda", "Brenda"), ("Sam, short for Samantha", "Sam"), ("im zoe btw", "Zoe")],
)
def test_a_name_given_plainly_later_is_taken(line: str, name: str) -> None:
    """Later in a conversation, with no name known and the bot asking none, a short line
    shaped as a name (a first name of some language opening it, ending its clause) is
    one, its own kind of answer."""
    (answer,) = ask("hello?", "I'm not sure I follow.", line)
    assert answer["text"] == f"Nice to meet you, {name}!"
    assert answer["human_attributes"] == {"name": name, "greeting_stage": "done"}
    assert answer["routing"]["kind"] == "name_plain"


def test_a_name_with_what_the_user_does_after_it_is_taken() -> None:
    """A first name opening a longer line and ending its clause is the user introducing
    themselves, with what they do after it; the same words with no name first are not."""
    line = "Shannon, art centre coordinator out near Alice"
    (answer,) = ask("hello?", "I'm not sure I follow.", line)
    assert answer["human_attributes"] == {"name": "Shannon", "greeting_stage": "done"}
    assert ask("hello?", "I'm not sure I follow.", "art centre coordinator out near Alice") == []


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Name is Walt.", "Walt"),
        ("ok good. name is Vikram", "Vikram"),
        ("I am Miss Hyacinth, 84 and still sharp", "Hyacinth"),
        ("This is Harold speaking.", "Harold"),
    ],
)
def test_a_name_said_as_name_is_after_a_title_or_speaking_is_taken(text: str, name: str) -> None:
    (hypothesis,) = ask(text)
    assert hypothesis["human_attributes"] == {"name": name, "greeting_stage": "done"}
    # someone else's name, or a word that is none, is not the user's
    assert extract_name("his name is Ben", bare_word_ok=False) is None
    assert extract_name("name is not important", bare_word_ok=False) is None


def test_a_plain_name_is_not_taken_once_a_name_is_known_or_in_a_question() -> None:
    assert ask("hello?", "I'm not sure I follow.", "Brenda", name="Ann") == []
    assert ask("hello?", "I'm not sure I follow.", "Brenda, is that you?") == []


def test_a_question_of_the_users_own_after_the_name_question_is_not_the_greetings() -> None:
    """Right after the script asked the name, a question that is not about that question
    is the user's own, however sure the turn's reading is that the reply is the
    greeting's: about the bot ("who is this", "wait what do i call you again": small talk
    says who it is) or about anything else ("what should I get my sister for her 30th?");
    a short one on "it" with a subject of its own ("Does it expose Prometheus metrics?")
    does not decline the name either. A question on the question itself still does."""

    own = [
        "who is this",
        "wait what do i call you again",
        "And whom, exactly, am I speaking with?",
        "what should I get my sister for her 30th?",
        "Does it expose Prometheus metrics?",
    ]
    about_the_question = [
        "does it matter",
        "Is that important?",
        "not really in the mood for names",
    ]
    with ServiceClient(app) as client:
        answers = client.post(
            "/respond", json={"dialogs": [replied(t) for t in own + about_the_question]}
        ).json()
    assert answers[: len(own)] == [[]] * len(own)
    for text, answer in zip(about_the_question, answers[len(own) :], strict=True):
        assert [h["text"] for h in answer] == [WHY_ASK_LINE], text


def test_a_greeting_named_in_a_question_is_not_said_back() -> None:
    """ "how do you say good morning properly", asked of a user whose name is known, got
    "Hello again, Nadia!": the intents annotator read a greeting in it by likeness. The
    annotator's own reading of the turn (as the pipeline runs it) leaves it to others."""
    from annotators.intents.app import annotation

    line = "Nice to meet you, Nadia! What would you like to talk about?"
    for text in ("how do you say good morning properly", "what about good morning"):
        read = {"intents": annotation(text, line, "greeting").model_dump()}
        answers = ask("hi", line, text, annotations=read, name="Nadia", greeting_stage="done")
        assert [a["text"] for a in answers] == []
    hello = {"intents": annotation("good morning!", line, "greeting").model_dump()}
    answers = ask("hi", line, "good morning!", annotations=hello, name="Nadia")
    assert answers[0]["text"] == "Hello again, Nadia!"


def test_a_name_someone_else_has_is_not_taken_for_the_users() -> None:
    """ "his name's Ben and he met his wife at a climbing gym" renamed the user Ben: a name
    is stored for good, and "name's" changes one already known. Another's name ("his",
    "her", "my dog's") is theirs; the user's own "name's Oskar" still counts."""
    for text in (
        "his name's Ben and he met his wife at a climbing gym",
        "my dog's name's Rex",
        "her name's Lily, she's three",
    ):
        assert extract_name(text, bare_word_ok=False) is None
        answers = ask("hi", "Hello again, Ann!", text, name="Ann", greeting_stage="done")
        assert all("name" not in a.get("human_attributes", {}) for a in answers)
    for text, name in (("name's Oskar", "Oskar"), ("hey name's oskar", "Oskar")):
        assert extract_name(text, bare_word_ok=False) == name
    (renamed,) = ask("hi", "Hello again, Ann!", "the name's Bond", name="Ann")
    assert renamed["human_attributes"]["name"] == "Bond"
