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
#: like to travel" 0.84), questions on other things below ("What's the weather like in
#: Paris?" ~ "have you ever been to paris" 0.55).
THRESHOLD = 0.55


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


def closest(text: str, topics: Mapping[str, TopicSpec]) -> tuple[str, float] | None:
    """The topic whose example is nearest in meaning to ``text`` and the similarity, or
    None below :data:`THRESHOLD`."""
    pairs = tuple((name, example) for name, spec in topics.items() for example in spec.examples)
    if not pairs or not text.strip():
        return None
    labels, rows = _index(pairs)
    similarities = meaning.similarities(text, rows)
    best = int(similarities.argmax())
    similarity = float(similarities[best])
    return (labels[best], similarity) if similarity >= THRESHOLD else None
