"""The labelled routing sets of ``bench/data/routing/`` (README.md there) stay usable as a
benchmark: every line is a conversation the benchmark can read, every label names a
service it knows, and each set keeps the size and the mix it was written with.

A malformed line or a misspelt label would otherwise surface as a wrong figure in
``bench/routing.py``, not as an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from bench.routing import HELD_OUT_SETS, TRAINING_SETS

SETS = Path(__file__).resolve().parents[2] / "bench" / "data" / "routing"

Label = Literal["greeting", "faq", "smalltalk", "knowledge", "llm"]
Topic = Literal[
    "greeting",
    "name",
    "about_bot",
    "feelings",
    "hobbies",
    "joke",
    "joke_followup",
    "thanks",
    "goodbye",
    "fact",
    "advice",
    "request",
    "reply_to_bot",
    "chitchat",
    "about_chorus",
    "other",
]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class LabelledTurn(BaseModel):
    """One user turn: what the user says, which services may answer it, what it is about."""

    model_config = ConfigDict(extra="forbid")

    user: Text
    fits: list[Label] = Field(min_length=1)
    topic: Topic


class Conversation(BaseModel):
    """One line of a set: a short conversation of 3 to 9 turns."""

    model_config = ConfigDict(extra="forbid")

    id: Text
    turns: list[LabelledTurn] = Field(min_length=3, max_length=9)


#: set name -> (id prefix, the fewest turns it holds); ``fresh`` is the set written after
#: the others had been run many times, in other voices, and never run before it was
#: complete (README.md there); ``fresh2`` is a fourth, written the same way once ``fresh``
#: had been run too, ``fresh3`` a fifth once ``fresh2`` had, ``fresh4`` a sixth once
#: all of those had been run several times, ``fresh5`` a seventh once ``fresh4`` had
#: been too, ``fresh6`` an eighth once every one of them had, ``fresh7`` a ninth, in
#: ordinary voices, once ``fresh6`` had been run too, and ``fresh8`` a tenth, ordinary
#: too, once ``fresh7`` had been run many times, ``fresh9`` an eleventh, ordinary
#: too, once ``fresh8`` had been run many times, ``fresh10`` a twelfth, ordinary too,
#: once ``fresh9`` had been run many times, and ``fresh11`` a thirteenth, ordinary too,
#: once ``fresh10`` had been run many times; ``train``, ``train2``, ``train3``,
#: ``train4``, ``train5``, ``train6``, ``train7``, ``train8``, ``train9``, ``train10``,
#: ``train11``, ``train12``, ``train13``, ``train14`` (train6 to train14 in ordinary voices,
#: each written blind), ``train15``, ``train16`` and ``train17`` (unusual voices, each
#: written blind) are more sets to fit on, beside dev
MINIMUMS = {
    "dev": ("dev-", 420),
    "holdout": ("holdout-", 220),
    "fresh": ("fresh-", 300),
    "fresh2": ("fresh2-", 320),
    "fresh3": ("fresh3-", 360),
    "fresh4": ("fresh4-", 360),
    "fresh5": ("fresh5-", 520),
    "fresh6": ("fresh6-", 520),
    "fresh7": ("fresh7-", 520),
    "fresh8": ("fresh8-", 560),
    "fresh9": ("fresh9-", 600),
    "fresh10": ("fresh10-", 600),
    "fresh11": ("fresh11-", 600),
    "train": ("train-", 650),
    "train2": ("train2-", 550),
    "train3": ("train3-", 550),
    "train4": ("train4-", 550),
    "train5": ("train5-", 550),
    "train6": ("train6-", 620),
    "train7": ("train7-", 620),
    "train8": ("train8-", 620),
    "train9": ("train9-", 620),
    "train10": ("train10-", 620),
    "train11": ("train11-", 620),
    "train12": ("train12-", 620),
    "train13": ("train13-", 620),
    "train14": ("train14-", 620),
    "train15": ("train15-", 620),
    "train16": ("train16-", 620),
    "train17": ("train17-", 620),
}
#: Every set of the folder: the thirty above and ``typed``, the careless-typing set, which
#: keeps no size or mix of the issue's (README.md there).
ALL_SETS = [*sorted(MINIMUMS), "typed"]


def read_set(name: str) -> list[Conversation]:
    """Every line of the set, parsed; a bad line fails naming its file and line."""
    path = SETS / f"{name}.jsonl"
    conversations = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            conversations.append(Conversation.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            pytest.fail(f"{path.name} line {number}: {exc}")
    return conversations


@pytest.mark.parametrize("name", ALL_SETS)
def test_every_line_is_a_labelled_conversation(name: str) -> None:
    """Each turn names known services, and "only the LLM" is never mixed with a cheap
    skill: a turn is either some cheap skill's or the LLM's alone."""
    for conversation in read_set(name):
        for turn in conversation.turns:
            assert len(set(turn.fits)) == len(turn.fits), (conversation.id, turn.user)
            if "llm" in turn.fits:
                assert turn.fits == ["llm"], (conversation.id, turn.user)


@pytest.mark.parametrize("name", sorted(MINIMUMS))
def test_each_set_keeps_its_size_and_mix(name: str) -> None:
    """At least the issue's number of turns, ids unique and of the set's own prefix, and
    35-45 % of the turns for the LLM alone, as README.md says the sets were written."""
    prefix, fewest = MINIMUMS[name]
    conversations = read_set(name)
    ids = [conversation.id for conversation in conversations]
    assert len(ids) == len(set(ids))
    assert all(conversation_id.startswith(prefix) for conversation_id in ids)
    turns = [turn for conversation in conversations for turn in conversation.turns]
    assert len(turns) >= fewest
    llm_only = sum(turn.fits == ["llm"] for turn in turns) / len(turns)
    assert 0.35 <= llm_only <= 0.45, f"{llm_only:.1%} of {name}'s turns are the LLM's alone"


#: The held-out sets in the order they were written, each after the ones before it.
HELD_OUT = list(HELD_OUT_SETS)
#: The sets to fit on, in the order they were written.
TRAINING = list(TRAINING_SETS)
#: set -> the sets none of whose sentences it may hold: a held-out set was written apart
#: from the sets before it (the first three knew only dev; fresh3 also knew train), and a
#: training set must not fit a held-out set's sentence nor repeat an earlier training set's
EARLIER: dict[str, list[str]] = {
    "holdout": ["dev"],
    "fresh": ["dev", "holdout"],
    "fresh2": ["dev", "holdout", "typed", "fresh"],
    "fresh3": ["dev", "holdout", "typed", "fresh", "fresh2", "train"],
    "fresh4": [*TRAINING[:5], *HELD_OUT[:5]],
    "fresh5": [*TRAINING, *HELD_OUT[:6]],
    "fresh6": [*TRAINING, *HELD_OUT[:7]],
    "fresh7": [*TRAINING, *HELD_OUT[:8]],
    "fresh8": [*TRAINING, *HELD_OUT[:9]],
    # written once every other set was, blind to them all: none of any other set
    "fresh9": [name for name in ALL_SETS if name != "fresh9"],
    # written blind like fresh9, once every other set was: none of any other set
    "fresh10": [name for name in ALL_SETS if name != "fresh10"],
    # written blind like fresh10, once every other set was: none of any other set
    "fresh11": [name for name in ALL_SETS if name != "fresh11"],
    **{name: [*TRAINING[:i], *HELD_OUT] for i, name in enumerate(TRAINING) if i > 0},
    # written blind beside train10, and fitted on only once written: none of any other set
    "train9": [name for name in ALL_SETS if name != "train9"],
    # written blind beside train12, in ordinary voices: none of any other set
    "train11": [name for name in ALL_SETS if name != "train11"],
    # written blind beside train11, in ordinary voices: none of any other set
    "train12": [name for name in ALL_SETS if name != "train12"],
    # written blind beside train11 and train12, and fitted on only once written: none of
    # any other set
    "train13": [name for name in ALL_SETS if name != "train13"],
    # written blind, in ordinary voices, and fitted on only once written: none of any
    # other set
    "train14": [name for name in ALL_SETS if name != "train14"],
    # written blind, in unusual voices and many languages, and fitted on only once
    # written: none of any other set
    "train15": [name for name in ALL_SETS if name != "train15"],
    # written blind beside each other, in unusual voices and many languages, and fitted on
    # only once written: none of any other set
    "train16": [name for name in ALL_SETS if name != "train16"],
    "train17": [name for name in ALL_SETS if name != "train17"],
}


@pytest.mark.parametrize(("name", "earlier"), list(EARLIER.items()))
def test_a_later_set_repeats_no_sentence_of_an_earlier_one(name: str, earlier: list[str]) -> None:
    """Each held-out set was written separately: beyond short openers ("hi", "thx", "bye"),
    no turn of it appears in a set written before it, so tuning on those cannot fit it."""
    seen = {
        turn.user.lower()
        for other in earlier
        for conversation in read_set(other)
        for turn in conversation.turns
    }
    repeated = [
        turn.user
        for conversation in read_set(name)
        for turn in conversation.turns
        if len(turn.user.split()) >= 3 and turn.user.lower() in seen
    ]
    assert repeated == []
