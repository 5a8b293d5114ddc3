"""Jokes, when the user asks for one, and another one when they ask for more.

The jokes are ``pyjokes``' (a package on PyPI, BSD-licensed, kept since 2014): one-line
jokes about programming and computers, which suit a bot made of services. Its "neutral"
category only, in English. The open corpus's "Tell me a joke" has answers too, but among
them are a quotation ("It is better to be silent and be thought a fool...") and refusals
("I'm a not a comedian."), so a request for a joke is answered here and never from it.

"Another one?", "one more" or "again" are a request for a joke only right after one: the
bot's last line is a joke of this list.
"""

from __future__ import annotations

import random
import re

import pyjokes

JOKES: tuple[str, ...] = tuple(dict.fromkeys(pyjokes.get_jokes(language="en", category="neutral")))
_KNOWN = frozenset(JOKES)

_I = re.IGNORECASE
#: "Tell me a joke", "Do you know any jokes?", "Got a joke for me?", "Joke please",
#: "Make me laugh", "Do you like jokes?" (the answer is one). Not "I have a joke for you"
#: or "That's a bad joke": the user asks the bot for one.
ASKS = re.compile(
    r"\btell\s+(?:me|us)\b[^.?!]*\bjokes?\b"
    r"|\b(?:tell|say|share|give\s+me)\s+(?:a|an|another|one\s+more|some|any)\b[^.?!]*\bjokes?\b"
    r"|\b(?:you|u)\s+(?:know|have|got)\b[^.?!]*\bjokes?\b"
    r"|\b(?:got|know)\s+(?:any|a|another)\b[^.?!]*\bjokes?\b"
    r"|\b(?:want|need|wanna)\s+(?:to\s+hear\s+)?(?:a|another|some)\s+(?:\w+\s+)?jokes?\b"
    r"|^\W*(?:a\s+|another\s+|one\s+more\s+)?jokes?(?:\s+please|\s+pls)?\W*$"
    r"|\bdo\s+(?:you|u)\s+(?:like|love|enjoy)\s+jokes\b"
    r"|\bjoke\s+(?:please|pls)\b|\bmake\s+me\s+laugh\b|\b(?:tell|say)\s+me\s+something\s+funny\b",
    _I,
)
#: "Another one?", "One more!", "haha, more please", "again": a joke only after a joke.
MORE = re.compile(
    r"^\W*(?:(?:ha(?:ha)+|lol|lmao|nice|good\s+one|ok(?:ay)?|funny)\W+)*"
    r"(?:(?:tell\s+me\s+|give\s+me\s+|how\s+about\s+|and\s+)?"
    r"(?:another(?:\s+one)?|one\s+more|more|again|some\s+more)"
    r"|(?:tell|say)\s+(?:it|one)\s+again)(?:\s+please|\s+pls)?\W*$",
    _I,
)


def is_joke(line: str) -> bool:
    return line in _KNOWN


def wanted(text: str, last_bot_line: str | None) -> bool:
    """Whether the user asks for a joke: outright, or for more right after one."""
    text = text.replace("\u2019", "'")
    if ASKS.search(text):
        return True
    return last_bot_line is not None and is_joke(last_bot_line) and bool(MORE.search(text))


def pick(said: list[str], seed: str) -> str:
    """A joke the bot has not said lately (any, once it has told them all), chosen with
    ``seed`` so a replay tells the same one."""
    recent = set(said)
    fresh = [joke for joke in JOKES if joke not in recent] or list(JOKES)
    return random.Random(seed).choice(fresh)
