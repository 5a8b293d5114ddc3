"""What an utterance is about when no pattern of the persona's knew it: the thing the user
asks the bot's opinion on ("Do you like sports?"), the thing they like ("I like pizza"),
and whether they speak of themselves ("I'm happy today").

Each gives the thing as the user wrote it, ready for a line that names it ("I haven't made
up my mind about sports yet"), or None where such a line would not fit: the bot or the
user themselves ("Do you like me?") or a verb ("Do you like to dance?").
"""

from __future__ import annotations

import re

from shared import spelling

_I = re.IGNORECASE

#: "Do you like sports?", "What do you think about computers?", "How do you feel about
#: jazz?", "Are you into chess?": the thing asked about ends the question.
OPINION = re.compile(
    r"^\W*(?:so|and|but|well|hey|ok(?:ay)?)?\W*"
    # the auxiliary dropped as people type: "u like taylor swift?", "yuh like reggae?",
    # "what you think about spicy food"
    r"(?:(?:do\s+)?(?:you|u|ya|yuh)\s+(?:like|love|enjoy)"
    r"|what\s+(?:do\s+)?(?:you|u)\s+think\s+(?:about|of)"
    r"|how\s+do\s+(?:you|u)\s+feel\s+about|are\s+(?:you|u)\s+(?:into|a\s+fan\s+of)"
    r"|what(?:'?s|\s+is)\s+your\s+(?:opinion|view|take)\s+(?:on|of|about))"
    r"\s+(?P<thing>[a-z][a-z'-]*(?:\s+[a-z][a-z'-]*){0,3})\s*[?.!]*\s*$",
    _I,
)
#: Words that make the thing the bot or the user themselves ("Do you like me?"), or a verb
#: ("Do you like to dance?"): the opinion line would not fit.
_NOT_THINGS = frozenset(
    {
        "me",
        "you",
        "u",
        "yourself",
        "your",
        "it",
        "this",
        "that",
        "them",
        "him",
        "her",
        "us",
        "to",
        "being",
        "what",
        "how",
        "when",
        "where",
        "who",
        "i",
        "i'm",
        "we",
        "they",
    }
)
#: The user speaks of their own mood ("I'm happy today", "I feel great", "I had a lovely
#: day"), a statement and not a question.
ABOUT_ME = re.compile(
    r"^\W*(?:(?:well|so|oh|today|actually)\W+)?(?:i'?m|im|i\s+am|i\s+feel|i\s+felt|i'?ve\s+been"
    r"|i\s+was|i\s+had|i'?ve\s+had|feeling|my\s+day)\b[^?]*$",
    _I,
)


#: "I like pizza", "I really love old films": something the user likes, and what.
USER_LIKES = re.compile(
    r"^\W*(?:(?:well|oh|and|also)\W+)?i\s+(?:really\s+|just\s+|also\s+)?(?:like|love|enjoy|adore)"
    r"\s+(?P<thing>[a-z][a-z'-]*(?:\s+[a-z][a-z'-]*){0,3})\s*[.!]*\s*$",
    _I,
)


#: Words after the thing that say how much or how often, besides adverbs in "-ly" ("really",
#: "mostly"): "too", "a lot", "so much", "very much".
_DEGREE = frozenset({"too", "though", "anyway", "much", "so", "very", "more"})


def _tail_of_degree(lowered: list[str]) -> int:
    """How many of the last words say how much or how often, not what: :data:`_DEGREE`
    ("too", "a lot", "so much"), and adverbs made of an English word and "-ly" ("mostly",
    "usually"; not "italy" nor "family"). "I like hiking mostly" is about hiking: "What
    do you like most about hiking mostly?" was the line."""
    end = len(lowered)
    while end:
        word = lowered[end - 1]
        if word == "lot" and end > 1 and lowered[end - 2] == "a":
            end -= 2
        elif word in _DEGREE or (
            word.endswith("ly") and len(word) > 4 and spelling.is_english(word[:-2])
        ):
            end -= 1
        else:
            break
    return len(lowered) - end


def _thing(words: str) -> str | None:
    """The thing as the user wrote it, "my" made "your", without words of degree after it
    (:func:`_tail_of_degree`); None when it is the bot, the user or a verb ("you", "me",
    "to dance"), which the lines would not fit."""
    split = words.split()
    lowered = [w.lower() for w in split]
    kept = len(split) - _tail_of_degree(lowered)
    if not kept:
        return None
    split, lowered = split[:kept], lowered[:kept]
    if lowered[0] in _NOT_THINGS or any(w in {"you", "your", "yourself", "u"} for w in lowered):
        return None
    return " ".join("your" if w == "my" else word for word, w in zip(split, lowered, strict=True))


def asked_about(text: str) -> str | None:
    """The thing whose opinion the user asks: "Do you like sports?" -> "sports"."""
    found = OPINION.search(text)
    return _thing(found.group("thing")) if found else None


def liked(text: str) -> str | None:
    """The thing the user says they like: "I really love old films" -> "old films"."""
    found = USER_LIKES.search(text)
    return _thing(found.group("thing")) if found else None


def about_themselves(text: str) -> bool:
    """Whether the user tells of themselves or their day, a statement, not a question."""
    return bool(ABOUT_ME.search(text))
