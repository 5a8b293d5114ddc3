"""Whether a bot's line leaves the user's name to come (shared/asking.py): the greeting reads
the reply to such a line, and small talk leaves it alone."""

from shared.asking import asked_name, awaits_name


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
