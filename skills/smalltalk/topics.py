"""Everyday topics the persona has a word on (its age, travel, pets, music, cooking...),
recognised by meaning.

The open corpus has nothing on many things people ask a bot they just met ("How old are
you?", "Have you ever been to Japan?", "Do you have any pets?"), and a pattern per phrasing
cannot foresee them. Each topic of the persona lists a few example questions and the bot's
lines; an utterance close in meaning to an example (:mod:`shared.meaning`) gets one of the
lines. The lines are the persona's, so a deployment that gives its bot another persona
gives it other answers, or other topics.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from shared import meaning

#: Lowest meaning similarity to a topic's nearest example that answers: paraphrases of an
#: example score 0.7 and up ("Where would you like to go on vacation?" ~ "where would you
#: like to travel" 0.84), questions on other things far below ("what is the capital of
#: france" 0.27, "is it going to rain" 0.10).
THRESHOLD = 0.55
#: ... for a question or a bid: people's own wording of an example's question falls just
#: under (“any good at baking?” ~ "do you bake" 0.53, "fun fact pls" ~ "tell me a fun fact"
#: 0.55), while a statement that near is the user's own news ("I really love old films!"
#: is near "what movies do you watch"), which a line about the bot does not answer.
ASKED_FROM = 0.5
#: ... for a question to the bot that the turn's reading already gives small talk, and that
#: the intents annotator finds only faintly like how the bot is, who it is or what it can
#: do (``skills.smalltalk.app.nearer_topic``): a topic answers it from here when its
#: examples are nearer than that intent's. Under 0.4 the nearest topic was as often
#: another subject as the question's ("all good with you?" ~ "seen any good films
#: recently" 0.37).
NEARER_FROM = 0.4


class TopicSpec(BaseModel):
    """One topic of the persona: what people ask about it, and what the bot says."""

    model_config = ConfigDict(extra="forbid")

    examples: list[str] = Field(min_length=1)
    lines: list[str] = Field(min_length=1)


@lru_cache(maxsize=32)
def _index(examples: tuple[tuple[str, str], ...]) -> tuple[list[str], np.ndarray]:
    """Each example's topic and the examples' meanings, computed once per set of topics
    (a persona seldom changes, and embedding is the costly part)."""
    return [topic for topic, _ in examples], meaning.embed([text for _, text in examples])


def closest(
    text: str, topics: Mapping[str, TopicSpec], threshold: float = THRESHOLD
) -> tuple[str, float] | None:
    """The topic whose example is nearest in meaning to ``text`` and the similarity, or
    None below ``threshold`` (:data:`ASKED_FROM` for a question or a bid)."""
    pairs = tuple((name, example) for name, spec in topics.items() for example in spec.examples)
    if not pairs or not text.strip():
        return None
    labels, rows = _index(pairs)
    similarities = meaning.similarities(text, rows)
    best = int(similarities.argmax())
    similarity = float(similarities[best])
    return (labels[best], similarity) if similarity >= threshold else None
