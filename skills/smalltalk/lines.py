"""What small talk read the user's turn as, and the persona's lines for it.

A :class:`Match` is a reading (a topic, how sure the skill is, what it is about);
:func:`render` gives the persona's alternatives for it and :func:`pick` the one to say.
Kept apart from the skill's matchers so that what reads the conversation around a line
(:mod:`skills.smalltalk.thread`) can know the skill's lines without loading its corpus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from skills.smalltalk.persona import Persona

Topic = Literal[
    "how_are_you",
    "doing_well",
    "thanks",
    "farewell",
    "bot_identity",
    "abilities",
    "likes",
    "hobbies",
    "home",
    "favourite",
    "no_favourite",
    "empathy",
    "glad",
    "opinion",
    "user_likes",
    "laughed",
    "about_user",
    "unread",
    "reaction",
    "asked_back",
    "own_life",
]


@dataclass(frozen=True)
class Match:
    """What the user's utterance is about, and how sure the skill is."""

    topic: Topic
    confidence: float
    thing: str | None = None
    #: Found by an intent only: a close corpus match may know better.
    intent_only: bool = False
    #: Read by likeness to an intent's examples, under the annotator's floor: calibrated
    #: apart (answer type ``<topic>_by_likeness``).
    by_likeness: bool = False
    #: Read from the annotator's intent by similarity to its examples, no pattern: a
    #: weaker reading than a pattern's ("Who made you?" is most like "who are you?"),
    #: calibrated apart (answer type ``<topic>_by_similarity``).
    by_similarity: bool = False


def join_words(items: list[str]) -> str:
    """["a", "b", "c"] -> "a, b and c"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def render(persona: Persona, match: Match) -> list[str]:
    """Every alternative line of the matched topic, in the persona's words."""
    thing = match.thing or ""
    values = {
        "name": persona.name,
        "description": persona.description,
        "lives": persona.lives,
        "likes": join_words(persona.likes),
        "hobbies": join_words(persona.hobbies),
        "thing": thing,
        "favourite": persona.favourites.get(thing, ""),
    }
    lines: list[str] = getattr(persona.templates, match.topic)
    return [line.format_map(values) for line in lines]


def pick(lines: list[str], said: list[str]) -> str | None:
    """The first line the bot has not said in the window; else one unlike its last line."""
    fresh = [line for line in lines if line not in said]
    if fresh:
        return fresh[0]
    last = said[-1] if said else None
    return next((line for line in lines if line != last), None)
