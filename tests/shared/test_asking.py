"""Whether a bot's line leaves the user's name to come (shared/asking.py): the greeting reads
the reply to such a line, and small talk leaves it alone. And what a turn asks, without the
greeting that opens it, as the docs are searched for it."""

from shared import asking
from shared.asking import asked_name, awaits_name, without_greeting


def test_the_greetings_name_question_and_why_it_asks_leave_the_name_to_come() -> None:
    assert asked_name("Hi! I'm Chorus. What's your name?")
    assert awaits_name("Hi! I'm doing well, thanks. I'm Chorus. What's your name?")
    assert awaits_name("Just so I know what to call you. You don't have to tell me, though.")
    assert awaits_name("I don't know your name yet. What is it?")


def test_the_greetings_other_lines_wait_for_nothing() -> None:
    assert not awaits_name("Nice to meet you, Ana! What would you like to talk about?")
    assert not awaits_name(
        "Hi Ana, nice to meet you! I'm Chorus. What would you like to talk about?"
    )
    assert not awaits_name("Hello again, Ana!")
    assert not awaits_name("Your name is Ana.")
    assert not asked_name("What a lovely name!")


def test_a_turns_opening_greeting_is_left_out_of_what_it_asks() -> None:
    for said, asked in [
        ("hi, is there a REST API for the bot?", "is there a REST API for the bot?"),
        ("hello there! how do I restore a backup?", "how do I restore a backup?"),
        ("hey bot - can it run on kubernetes", "can it run on kubernetes"),
        ("Hi. Where are conversations stored?", "Where are conversations stored?"),
        ("yo what model are you running on", "what model are you running on"),
    ]:
        assert without_greeting(said) == asked, said
    # a greeting alone is all there is to read; a word that only starts like one is kept
    for kept in ("hello", "hi!", "Hiya", "history of rome", "hypothermia symptoms"):
        assert without_greeting(kept) == kept, kept


def test_an_english_question_word_opening_another_language_asks_nothing() -> None:
    """ "do widzenia" is Polish for goodbye, not a question opened by "do"; with its
    question mark, or in English, it asks."""
    assert not asking.asks_something("do widzenia")
    assert not asking.asks_outright("Do widzenia!")
    assert asking.asks_something("do widzenia?")
    assert asking.asks_something("do you like dogs")
    assert asking.asks_outright("how mony o them tae a kilo")


def test_a_question_after_a_clause_of_its_own_asks() -> None:
    """A question word opening a later clause asks as one opening the turn does, and
    "any" with a noun opening the turn asks; a statement with the same words does not."""
    assert asking.asks("ok thanks, what about slack")
    assert asking.asks("im new here, so how do i add a skill")
    assert asking.asks("any plans to support whatsapp")
    assert not asking.asks("any more and i'd have given up")
    assert not asking.asks("thanks, that helped a lot")


def test_am_asks_only_before_its_subject() -> None:
    """ "am i late" asks; "am good bro, tired little" is chat's "I am" with the "I"
    dropped, and "I am Fatima" tells: neither asks, however "am" opens them."""
    assert asking.asks_something("am i late")
    assert asking.asks("Am I talking to a bot")
    for told in ("am good bro, tired little", "am bricking it", "I am Fatima"):
        assert not asking.asks_something(told), told
        assert not asking.asks(told), told


def asks_the_bot(text: str) -> bool:
    """As small talk reads a turn: it asks, and asks the bot about its own life."""
    return asking.asks_something(text) and asking.on_its_own_life(text)


def test_a_yes_or_no_on_the_bots_own_life_asks_the_bot() -> None:
    """A question that names the bot and asks a yes or no of it is one on its own life;
    a question word, a bid for what it can do or a word pointing back at what was said
    makes the subject another's, and a statement asks nothing."""
    for own in ("do u have a doggy", "you ever tried kava?", "do bots get sore", "Do you knit?"):
        assert asks_the_bot(own), own
    for other in (
        "what did you do today",
        "can you recommend a book?",
        "have u watched it",
        "is it going to rain tomorrow?",
        "you have a lovely voice",
    ):
        assert not asks_the_bot(other), other
