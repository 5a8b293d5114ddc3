"""Jokes, when the user asks for one, and another one when they ask for more.

The jokes are ``pyjokes``' neutral one-liners (:mod:`shared.jokes`, which the turn's
reading shares). The open corpus's "Tell me a joke" has answers too, but among
them are a quotation ("It is better to be silent and be thought a fool...") and refusals
("I'm a not a comedian."), so a request for a joke is answered here and never from it.

"Another one?", "one more" or "again" are a request for a joke only right after one: the
bot's last line is a joke of this list, or its offer of another ("Ha! Want
another one?"), which a "yes" takes up too. Laughter right after a joke ("Haha", "That's
funny") is answered by that offer (the persona's ``laughed`` lines).
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection

from shared.jokes import JOKES, is_joke

_I = re.IGNORECASE
#: "Tell me a joke", "Do you know any jokes?", "Got a joke for me?", "Joke please",
#: "Make me laugh", "say something funny", "got anything that'll make me giggle", "Do you
#: like jokes?" (the answer is one). Not
#: "I have a joke for you" or "That's a bad joke": the user asks the bot for one.
ASKS = re.compile(
    r"\btell\s+(?:me|us)\b[^.?!]*\bjokes?\b"
    r"|\b(?:tell|say|share|give\s+me)\s+(?:a|an|another|one\s+more|some|any)\b[^.?!]*\bjokes?\b"
    r"|\b(?:you|u)\s+(?:know|have|got)\b[^.?!]*\b(?:jokes?|puns?)\b"
    r"|\b(?:got|know)\s+(?:any|a|another)\b[^.?!]*\bjokes?\b"
    r"|\b(?:want|need|wanna)\s+(?:to\s+hear\s+)?(?:a|another|some)\s+(?:\w+\s+)?jokes?\b"
    r"|^\W*(?:a\s+|another\s+|one\s+more\s+)?jokes?(?:\s+please|\s+pls)?\W*$"
    # asked in a few words: "any good jokes?", "got any funny ones?" is a joke's only after one
    r"|^\W*(?:ok(?:ay)?\W+|so\W+)?(?:got\s+)?any\s+(?:\w+\s+)?jokes?(?:\s+for\s+(?:me|us))?\W*$"
    r"|\bdo\s+(?:you|u)\s+(?:like|love|enjoy)\s+jokes\b"
    r"|\bjoke\s+(?:please|pls)\b|\bmake\s+me\s+(?:laugh|lol|giggle|chuckle)\b"
    # something funny asked for: "say sum funny", "got anything that'll make me giggle"
    r"|(?:\b(?:tell|say|gimme|give\s+me|cheer\s+me\s+up\s+(?:with|w))\s+(?:me\s+|us\s+)?"
    r"|(?:^\W*|\b(?:you|u)\s+)(?:got|have|know)\s+)"
    r"(?:something|anything|smth|sth|sum)\b[^.?!]{0,30}?\b(?:funny|hilarious|laugh|giggle|smile)\b"
    # "hit me with a joke", "crack a joke"; a plain one after one of a kind ("ok just a
    # normal joke then")
    r"|\b(?:hit\s+(?:me|us)\s+with|crack|gimme)\b[^.?!]*\bjokes?\b"
    r"|\b(?:a|another|just\s+a)\s+(?:normal|regular|plain|ordinary)\s+joke\b"
    r"|^\W*(?:can|could|would|will)\s+(?:you|u)\b[^.?!]*\b(?:a|another|some)\s+(?:\w+\s+)?jokes?\b",
    _I,
)
#: "Another one?", "One more!", "haha, more please", "again", "ok that's good, another!",
#: "go on one more", "another 1": a joke only after a joke.
MORE = re.compile(
    r"^\W*(?:[^?]{0,40}?[,!.]\s*)?(?:(?:ha(?:ha)*|lol|lmao|nice|good\s+one|ok(?:ay)?|funny)\W+)*"
    r"(?:(?:go\s+on\W+(?:then\W+)?(?:do\s+)?|tell\s+me\s+|give\s+me\s+|how\s+about\s+|and\s+)?"
    r"(?:another(?:\s+(?:one|1))?|(?:one|1)\s+more|more|again|(?:some|any)\s+more)"
    r"|(?:tell|say)\s+(?:it|one)\s+again)(?:\s+please|\s+pls)?\W*$",
    _I,
)


#: "Yes", "sure", "go on": taking up the bot's offer of another joke.
YES = re.compile(
    r"^\W*(?:yes|yeah|yep|yup|sure|ok(?:ay)?|please|go\s+(?:on|ahead)|why\s+not|of\s+course)"
    r"(?:\W+(?:please|go\s+on|thanks|tell\s+me))*\W*$",
    _I,
)
#: Laughter or praise right after a joke.
LAUGH = re.compile(
    r"^\W*(?:(?:ha(?:ha)+|he(?:he)+|lol|lmao|rofl|xd)\W*)+$"
    r"|^\W*(?:(?:ha(?:ha)+|lol)\W+)?(?:that'?s|that\s+is|it'?s|very|so)?\s*"
    r"(?:so\s+|really\s+|very\s+)?(?:funny|hilarious|good\s+one|nice\s+one|a\s+good\s+one)\W*$",
    _I,
)

#: Laughter anywhere in the turn ("lol my head hurts"): whatever else it says, a reaction.
LAUGHTER = re.compile(r"\b(?:ha(?:ha)+|he(?:he)+|lol|lmao|rofl|xd)\b", _I)


#: A joke asked on a subject or of a form ("a joke about Spanish food", "a knock-knock
#: joke"): the shipped jokes are about programming, so such a request is told one that
#: seldom fits (its own calibration answer type, see skills/smalltalk/app.py).
ON_A_SUBJECT = re.compile(
    r"\b(?:jokes?|ones?|any|some)\s+(?:about|on|with|for(?!\s+(?:me|us|you|u)\b))\s+\w"
    r"|\bknock[\s-]*knock\b|\bpuns?\b",
    _I,
)
#: The word between an article and "joke" names a kind of joke ("a dad joke") unless it is
#: one of these ("a good joke").
_ANY_JOKE = frozenset(
    [
        *("a", "an", "another", "some", "any", "more", "the", "one", "of", "me", "us"),
        *("good", "funny", "your", "best", "worst", "favourite", "favorite", "great", "short"),
        *("quick", "new", "different", "bad", "really", "very", "super", "proper", "decent"),
        *("clean", "silly", "little", "nice", "fun", "random", "real", "actual", "cool"),
        *("normal", "regular", "plain", "ordinary", "old"),
    ]
)
#: Up to two words between an article and "joke" ("any good dad jokes"); after a joke,
#: "one" stands for it ("another football one", "a knock knock one this time").
_BEFORE_JOKE = re.compile(
    r"\b(?:a|an|some|any|another|your|ur|ya)\s+([\w-]+(?:\s+[\w-]+)?)\s+jokes?\b", _I
)
_BEFORE_ONE = re.compile(r"\b(?:a|an|some|any|another)\s+([\w-]+(?:\s+[\w-]+)?)\s+ones?\b", _I)


def on_a_subject(text: str, after_joke: bool = False) -> bool:
    """A joke asked on a subject or of a kind, not any joke; ``after_joke`` (the bot's
    last line was one), "one" stands for a joke too."""
    if ON_A_SUBJECT.search(text):
        return True
    kinds = _BEFORE_JOKE.findall(text) + (_BEFORE_ONE.findall(text) if after_joke else [])
    return any(word.lower() not in _ANY_JOKE for words in kinds for word in words.split())


#: How many of the user's turns before this one may have asked for the joke that "one
#: more" asks again for: "tell me a joke", then "lol", then "go on one more".
ASKED_WITHIN = 2


def asked_lately(user_lines: list[str]) -> bool:
    """Whether one of the user's last :data:`ASKED_WITHIN` turns before this one asked for
    a joke (:data:`ASKS`), any joke, whoever told it: with an LLM in the pipeline the LLM
    may have, in words no list here knows. One on a subject ("a joke about dinosaurs")
    is not counted: "another" is then one more on it."""
    return any(
        ASKS.search(line) and not on_a_subject(line)  # "another" of a kind is the LLM's
        for line in (line.replace("\u2019", "'") for line in user_lines[-ASKED_WITHIN:])
    )


def wanted(
    text: str,
    bot_lines: list[str],
    offers: Collection[str] = (),
    agrees: bool = False,
    asked_before: bool = False,
) -> bool:
    """Whether the user asks for a joke: outright, for more right after one (the bot's
    last line is one, or ``asked_before``: the user asked for one lately,
    :func:`asked_lately`), or by taking up the bot's offer of another (``offers``: the
    lines that make it), in words of :data:`MORE` or :data:`YES` or any the intents
    annotator reads as a yes (``agrees``: "yeah go on then", "yes pls")."""
    text = text.replace("\u2019", "'")
    if ASKS.search(text):
        return True
    last = bot_lines[-1] if bot_lines else None
    if last is None:
        return False
    if (is_joke(last) or last in offers) and (MORE.search(text) or asks_of_a_kind(text)):
        return True
    if asked_before and MORE.search(text):
        return True
    return last in offers and bool(agrees or MORE.search(text) or YES.search(text))


#: A reply to a joke this short, not a question, is a reaction to it ("haha ok that was
#: cute", "hahaha that was awful", "ok that's actually funny").
REACTION_WORDS = 6
#: A reply that asks for something ("Now tell me one about penguins") is no reaction.
_REQUEST = re.compile(r"\b(?:tell|give|say|show|make|write|explain|what|how|why)\b", _I)
#: Right after a joke, a reply that asks about it or for something else: the joke not
#: understood ("i dont get it lol", "didn't get that one"), something else asked for
#: ("something cleaner", "anything less nerdy"). No laugh, and no line of small talk's,
#: answers it: the LLM can explain or oblige.
_ASKS_AFTER = re.compile(
    r"\b(?:don'?t|do\s+not|didn'?t|did\s+not)\s+(?:\w+\s+)?(?:get|understand)\b"
    r"|^\W*(?:\w+\W+)?(?:something|anything)\b",
    _I,
)


#: Right after a joke: another of a kind asked for ("haha another knock knock one", "got
#: any about football", "a plane joke?"), which no laugh answers.
_OF_A_KIND = re.compile(
    r"\b(?:another|any|some|one)\s+(?:[\w-]+\s+){0,3}?(?:ones?|jokes?|puns?)\b"
    r"|\b(?:any|some|one|ones)\s+(?:about|on|with)\s+\w|\ba\s+(?:[\w-]+\s+){1,2}(?:one|joke|pun)\b",
    _I,
)


def asks_of_a_kind(text: str) -> bool:
    """Whether a reply to a joke asks for another of a kind (:data:`_OF_A_KIND`), which
    :func:`on_a_subject` then reads as on a subject."""
    return _OF_A_KIND.search(text) is not None and on_a_subject(text, after_joke=True)


def asks_after_a_joke(text: str, bot_lines: list[str]) -> bool:
    """Whether the user, right after the bot's joke, asks about it or for something else
    (:data:`_ASKS_AFTER`), or for another of a kind (:func:`asks_of_a_kind`)."""
    if not bot_lines or not is_joke(bot_lines[-1]):
        return False
    return _ASKS_AFTER.search(text) is not None or asks_of_a_kind(text)


def laughs(text: str, bot_lines: list[str]) -> bool:
    """Whether the user reacts to the joke the bot just told: laughter, or a short word
    on it; not when the reply asks for another of a kind."""
    if not bot_lines or not is_joke(bot_lines[-1]) or asks_after_a_joke(text, bot_lines):
        return False
    short = len(re.findall(r"\w+", text)) <= REACTION_WORDS and "?" not in text
    return bool(LAUGH.search(text)) or (short and not _REQUEST.search(text))


def pick(said: list[str], seed: str) -> str:
    """A joke the bot has not said lately (any, once it has told them all), chosen with
    ``seed`` so a replay tells the same one."""
    recent = set(said)
    fresh = [joke for joke in JOKES if joke not in recent] or list(JOKES)
    return random.Random(seed).choice(fresh)
