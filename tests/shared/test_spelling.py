"""Careless chat typing read the careful way (shared.spelling): the packages' own data,
offline, and the words a skill must not change kept as typed."""

import pytest

from shared import spelling


@pytest.mark.parametrize(
    ("typed", "careful"),
    [
        ("im tired", "i'm tired"),
        ("whats ur name", "what's your name"),
        ("ur funny lol", "you are funny lol"),
        ("how r u", "how are you"),
        ("cant sleep, dont know why", "can't sleep, don't know why"),
        ("thx, tmrw then", "thanks, tomorrow then"),
        ("im so anxoius", "i'm so anxious"),
        ("waht can u do", "what can you do"),
        ("teh end", "the end"),
        ("sooo bored", "so bored"),
    ],
)
def test_chat_spelling_is_read_the_careful_way(typed: str, careful: str) -> None:
    assert spelling.normalise(typed) == careful


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("I'm Oskar", "I'm Oskar"),  # a capitalised word is a name
        ("Im Oskar", "i'm Oskar"),
        ("Name's Oskar", "Name's Oskar"),
        ("hahaha", "hahaha"),  # laughter, not a typo of "yamaha"
        ("hows it goin", "how's it goin"),  # "goin": "join" or "going"? too close to call
        ("i built a shed and its well made", "i built a shed and its well made"),
        ("howdy! wanna chat?", "howdy! wanna chat?"),  # abbreviations that are words
        ("pls", "pls"),  # short and unknown
        ("see you l8r", "see you l8r"),  # letters beside digits are no word
    ],
)
def test_what_is_not_careless_is_kept_as_typed(typed: str, read: str) -> None:
    assert spelling.normalise(typed) == read


def test_a_lowercase_name_is_kept_by_the_reading_for_echoing() -> None:
    """``normalise`` may correct an unknown lowercase word, a name among them; the text a
    skill takes a name from has only the contractions and abbreviations rewritten."""
    assert spelling.unabbreviate("hey im oskar, thx") == "hey i'm oskar, thanks"
    assert spelling.unabbreviate("im so anxoius") == "i'm so anxoius"


def test_punctuation_spacing_and_emoji_are_kept() -> None:
    assert spelling.normalise("u there?? 😅  ok...") == "you there?? 😅  ok..."


def test_the_unsafe_contractions_are_the_packages_own() -> None:
    """The copy of the ``contractions`` package's unsafe forms, kept so that the package is
    not imported, is its list: "its" and "were" stay as typed for the package's reason."""
    import contractions

    assert contractions.safety_keys == spelling.UNSAFE
    assert spelling.normalise("its fine, we were there") == "its fine, we were there"


def test_words_a_caller_keeps_are_left_as_typed_and_the_rest_read_as_usual() -> None:
    """A knowledge base's own terms are no typos ("uvicorn" would read "unicorn"), while
    the typos and abbreviations around them are read as always."""
    terms = {"uvicorn", "failover"}
    assert spelling.normalise("uvicorn failover") == "unicorn allover"
    kept = spelling.normalise("whats ur uvicorn failover bakup thx", keep=terms.__contains__)
    assert kept == "what's your uvicorn failover backup thanks"
