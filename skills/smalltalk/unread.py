"""A short turn in words the bot does not read: most likely thanks, a goodbye or a laugh.

Late in a conversation people thank, say goodbye and react in their own language or in
chat shorthand ("gracias!", "tschüss", "asante sana", "dank je wel!", "lmaooo"), and no
English pattern, example or embedding reads them: the LLM was asked, or the fallback said
it did not follow. On the four training sets, such turns (a few words after the opening
turn, at least half of them unknown to the English dictionary the speller corrects by, no question)
were small talk's in 74 of 78 (thanks, goodbyes, laughter, how the user is); the others were
a keyboard smash and a feeling in Spanish. Small talk answers them with a warm nod that
fits each of those (the persona's ``unread`` line), as sure as its calibration finds such
answers to be (answer type ``unread``, raw score the share of unknown words). No list of
foreign phrases is kept: which words are English is the dictionary's, and whether such a
turn fits small talk is the curve's and the turn's reading's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared import first_names, spelling

#: A turn of at most this many words may be read this way: thanks, goodbyes and laughs are
#: short; longer turns in another language say something the LLM should read.
MOST_WORDS = 4
_LETTERS = re.compile(r"[^\W\d_]+")
#: A figure: a word that opens with a digit ("80kg", "22"; not "l8r").
_FIGURE = re.compile(r"(?<![^\W\d_])\d")


def capitalised_name(words: list[str]) -> bool:
    """Whether one of ``words`` (a turn's words after its first) is capitalised and a first
    name of some language (:mod:`shared.first_names`): "ik ben Sanne", "Jack. Jack from
    Leeds". Other capitalised words are no name: German capitalises its nouns ("Auf
    Wiedersehen!", "Vielen Dank"), and a word after a stop opens a sentence ("Grazie
    mille! Ciao")."""
    names = first_names.first_names()
    return any(
        word[0].isupper() and word.lower() in names
        for word in words
        if word.lower() not in spelling.NOT_FOREIGN | {"i"}
    )


def unknown_share(text: str, opening: bool) -> float | None:
    """The share of the words of ``text`` the English dictionary does not hold, when the
    turn is read this way: not the conversation's opening turn (the greeting's), a few
    words, no question mark (a question in another language is the LLM's), no capitalised
    first name after the first word and no bare first name (a name: "ik ben Sanne",
    "Aoife" are the greeting's), and at least half of
    its words unknown. Else None."""
    if opening or "?" in text or _FIGURE.search(text):
        return None  # a figure ("im 80kg", "5mg") is a detail, no word of another language
    typed = _LETTERS.findall(text)
    if capitalised_name(typed[1:]):
        return None
    words = [w.lower() for w in spelling.words_of(text)]
    words = [w for w in words if w not in spelling.NOT_FOREIGN]
    if not 0 < len(words) <= MOST_WORDS:
        return None
    if len(words) == 1 and words[0] in first_names.first_names():
        return None  # a bare name ("kev", "Aoife"), the greeting's
    # a word with an apostrophe is an English contraction ("didn't") unless its parts are not
    unknown = sum(
        not spelling.is_english(word) and not spelling.is_english(word.split("'")[0])
        for word in words
    )
    if 2 * unknown < len(words):
        return None
    return round(unknown / len(words), 4)


#: A statement of at most this many words may get the nod by the turn's reading
#: (:func:`few_words`): thanks, goodbyes and reactions are short, in any language.
NOD_WORDS = 6


def few_words(text: str) -> bool:
    """Whether ``text`` is a few words (:data:`NOD_WORDS` at most) with no question mark
    and no name in them (no capitalised first name after the first word, no first name
    that is not an English word: "Jack. Jack from Leeds", "Ahmed" are the greeting's), in any
    language: a turn small talk may nod to when the turn's reading is sure it is small
    talk's (:data:`shared.reading.NOD`)."""
    if "?" in text:
        return False
    words = spelling.words_of(text)
    return 0 < len(words) <= NOD_WORDS and not names_someone(text)


def names_someone(text: str) -> bool:
    """Whether ``text`` holds a name, as the greeting would read one: a capitalised first
    name after the first word ("Jack. Jack from Leeds"), a bare first name ("kev", "Steve"), or a
    first name of three letters or more that is not an English word ("zoe :)", not "ah
    nice one"). Such a turn is the greeting's, not
    one small talk answers by the reading. "I" is no name ("pasta mostly, I make it
    fresh")."""
    typed = _LETTERS.findall(text)
    if capitalised_name(typed[1:]):
        return True
    words = [w.lower() for w in spelling.words_of(text)]
    names = first_names.first_names()
    if len(words) == 1 and words[0] in names:
        return True  # a bare name ("kev"), the greeting's
    # a word of two letters among others is chat's sooner than a name: "ah nice one",
    # "cool ty" ("Ah" and "Ty" are names in some lists); a name of two, the greeting reads
    return any(len(w) > 2 and w in names and not spelling.is_english(w) for w in words)


#: A bid for something, however glad.
_PLEASE = re.compile(r"\b(?:please|pls|plz)\b", re.IGNORECASE)


def bids(text: str) -> bool:
    """Whether ``text`` asks for something politely ("fun fact pls", "shorter, please")."""
    return _PLEASE.search(text) is not None


#: Someone else doing something ("He loved his garden", "she spends, I save", "He supports
#: Arsenal"): news of a person, not a reaction to what the bot said, however glad its words
#: ("she's so cute" still is one).
_SOMEONE_DOES = re.compile(
    r"^\W*(?:(?:ha+|haha+|lol|oh|ah|ooh|wow|yeah|ok)\W+)?(?:he|she|they|we|his|her|their|our)"
    r"\s+(?!(?:is|are|was|were|so|really|very)\b)[a-z]+\b(?!')",
    re.IGNORECASE,
)
#: A reaction is this short ("haha brilliant", "nice one", "cool cool").
REACTION_WORDS = 4
#: ... and at least this much of it is the sentiment annotator's positive words (VADER's
#: ``positive`` share): "nice one" is half, "this is kinda cool ngl" a fifth.
REACTION_SHARE = 0.5


def reaction(text: str, annotations: Mapping[str, Any], opening: bool) -> float | None:
    """A short, glad reaction to what the bot said ("nice", "haha brilliant", "cool cool"),
    as the sentiment annotator reads it (VADER: positive, its positive words at least
    :data:`REACTION_SHARE` of the turn), that asks nothing and opens no conversation: its
    compound score, for the calibration to say what a nod to it is worth (answer type
    ``reaction``). Not a bid ("please") nor a name with a smile ("zoe :)"). Else None."""
    words = [w.lower() for w in _LETTERS.findall(text)]
    if opening or "?" in text or not 0 < len(words) <= REACTION_WORDS:
        return None
    if bids(text):
        return None  # a bid ("Shorter, please"), not a reaction
    if _SOMEONE_DOES.search(text.replace("\u2019", "'")):
        return None  # news of a person ("he loved fishing"), not a reaction
    names = first_names.first_names()
    if any(w in names and not spelling.is_english(w) for w in words):
        return None  # a name with a smile ("zoe :)"), the greeting's
    sentiment = annotations.get("sentiment")
    if not isinstance(sentiment, Mapping) or sentiment.get("label") != "positive":
        return None
    positive, compound = sentiment.get("positive"), sentiment.get("compound")
    if not isinstance(positive, int | float) or not isinstance(compound, int | float):
        return None
    return round(float(compound), 4) if positive >= REACTION_SHARE else None


#: A short turn that ends by asking the bot back ("tutto bene grazie, and you?", "iyiyim,
#: thanks. what about you?", "jól, köszi. you?"), whatever language the rest is in.
_ASKS_BACK = re.compile(
    r"(?:(?:^|[\s,.!;])(?:and|how\s+about|what\s+about|&)\s+(?:you|u|yourself|urself)\s*[?!.]*"
    r"|[,.!;]\s*(?:you|u)\s*\?+)\s*$",
    re.IGNORECASE,
)
#: ... of at most this many words: a longer one is about more than how each of them is.
ASKS_BACK_WORDS = 8


def asks_back(text: str, opening: bool) -> float | None:
    """The user says how they are, in any words, and asks the bot back: the share of the
    turn's words before the question back that the English dictionary does not hold (a
    turn in another language is as much such a reply as an English one the patterns
    missed), for the calibration (answer type ``asked_back``). Else None."""
    found = _ASKS_BACK.search(text)
    if opening or found is None:
        return None
    words = [w.lower() for w in spelling.WORD_OF_ANY_LANGUAGE.findall(text[: found.start()])]
    if not 0 < len(words) <= ASKS_BACK_WORDS:
        return None
    return round(sum(not spelling.is_english(w) for w in words) / len(words), 4)


def warm() -> None:
    """Load the first names now (a service calls it at start-up, not on its first turn)."""
    first_names.first_names()
