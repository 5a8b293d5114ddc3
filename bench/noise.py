"""A labelled set as people type it in a hurry: the same turns, lowercased, without
apostrophes or the last stop, "u" for "you", a letter swapped.

The dev set is mostly well-formed English, and its writer's; people who chat with a bot
they just met type carelessly, and the holdout set (and issue #46's hidden set) have more
lowercase, misspelt, clipped and slangy turns. Scoring dev's turns with such noise says how
much of a figure depends on tidy typing, on dev alone, without reading the holdout set's
phrases. The noise is deterministic (seeded by the conversation and the turn), so a run
can be repeated and two versions of the code compared on the same noisy turns; labels are
kept, as the meaning of a turn does not change with its spelling.

    .venv/bin/python -m bench.calibrate --folds 5 --noise 0.5
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from bench.routing import Conversation

#: Chat spellings, each applied to a turn with the noise's chance.
_CLIPPED = (
    (re.compile(r"\byou\b", re.IGNORECASE), "u"),
    (re.compile(r"\byour\b", re.IGNORECASE), "ur"),
    (re.compile(r"\bare\b", re.IGNORECASE), "r"),
    (re.compile(r"\bplease\b", re.IGNORECASE), "pls"),
    (re.compile(r"\bthanks\b", re.IGNORECASE), "thx"),
)
_LONG_WORD = re.compile(r"\b[a-zA-Z]{5,}\b")


def swap_letters(text: str, rng: random.Random) -> str:
    """Two neighbouring letters of one long word swapped ("question" -> "qusetion")."""
    words = list(_LONG_WORD.finditer(text))
    if not words:
        return text
    word = rng.choice(words)
    at = rng.randrange(word.start() + 1, word.end() - 2)
    return text[:at] + text[at + 1] + text[at] + text[at + 2 :]


def noisy_turn(text: str, chance: float, rng: random.Random) -> str:
    """``text`` with each kind of carelessness applied with ``chance``."""
    if rng.random() < chance:
        text = text.lower()
    if rng.random() < chance:
        text = text.replace("'", "").replace("\u2019", "")
    if rng.random() < chance:
        text = text.rstrip(".!?") or text
    for pattern, short in _CLIPPED:
        if rng.random() < chance:
            text = pattern.sub(short, text)
    if rng.random() < chance / 2:
        text = swap_letters(text, rng)
    return text


def noisy(conversations: Sequence[Conversation], chance: float) -> list[Conversation]:
    """Every turn of ``conversations`` made careless with ``chance`` (0: unchanged)."""
    made = []
    for conversation in conversations:
        turns = []
        for place, turn in enumerate(conversation.turns):
            rng = random.Random(f"{conversation.id}:{place}")
            turns.append(turn.model_copy(update={"user": noisy_turn(turn.user, chance, rng)}))
        made.append(conversation.model_copy(update={"turns": turns}))
    return made
