"""Whether the user's turn carries on the LLM's thread.

A statement right after the LLM's answer, or after small talk only guessed at its mood,
often goes on with what the LLM was asked, which only the LLM can answer; small talk
calibrates its guesses apart there (answer type ``<type>_after_llm``). Its own module so
that the calibration bench can replay the same rule without loading the skill's corpus.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent.sdk import DialogView
from shared import reading
from skills.smalltalk.lines import Match, Topic, render
from skills.smalltalk.persona import Persona

#: The answer types read from the mood alone, calibrated apart right after the LLM's
#: answer (answer type ``<type>_after_llm``): there a statement often carries on the LLM's
#: thread ("my neighbour just got one", "no onions tho, i hate them"), which only the LLM
#: can answer (label rule 9), where after small talk's own question it is a reply.
AFTER_LLM_APART: frozenset[Topic] = frozenset({"about_user", "empathy", "glad"})
AFTER_LLM = "_after_llm"
#: The guesses from the mood that answer a feeling: a feeling the user states of themselves
#: is small talk's wherever it comes (label rule 7), on the LLM's thread too.
FEELINGS: frozenset[Topic] = frozenset({"empathy", "glad"})
#: The user stating their own feeling, opening the turn or a clause of it: "im so stressed
#: about this exam", "idk im kinda scared about the whole thing", "third time. im so
#: useless", "I feel rotten honestly"; not what they are ("I'm a nurse") nor what they do
#: ("I'm going..."), nor a feeling put on what was said ("that's what worries me").
_FEELS = re.compile(
    r"(?:^|[.!?,;:]\s*)\W*(?:(?:idk|ok|okay|honestly|tbh|well|so|and|but|just|still|yeah|no"
    r"|oh|ugh|lol|sorry)\W+)*(?:i'm|im|i am|i feel|i'm feeling|im feeling|feeling)\s+"
    r"(?:(?:so|really|kinda|kind of|a bit|a little|pretty|quite|just|very|too|bit|still"
    r"|getting|not)\s+)*(?!(?:a|an|the|from|in|at|on|with|here|back|off|out|going|gonna|"
    r"trying|looking|thinking|about|not)\b)(?!\w+ing\b)[a-z]+",
    re.IGNORECASE,
)


def states_a_feeling(text: str) -> bool:
    """Whether ``text`` states the user's own feeling (:data:`_FEELS`). On the six training
    sets, of small talk's guesses from the mood for a feeling on the LLM's thread, such
    turns were small talk's in 13 of 15; the others there, only the LLM's in 35 of 67."""
    return _FEELS.search(text) is not None


def after_llm(skill: str | None) -> bool:
    """The bot's last line was the LLM's kind of answer (the LLM's, or the fallback's,
    which stands for it where no LLM runs: :data:`shared.reading.LLM_KIND`)."""
    return skill in reading.LLM_KIND


#: How many of the bot's latest lines :func:`on_llm_thread` looks back through.
THREAD_LINES = 3


def guess_lines(persona: Persona) -> frozenset[str]:
    """Every line small talk answers a statement with by likeness or from the mood: its
    guesses from the mood (:data:`AFTER_LLM_APART`: "Oh, tell me more! How did that come
    about?", "I'm sorry to hear that. ...") and its persona topics' lines ("No pets for
    me, though a python would suit me...")."""
    mood = (
        line for topic in sorted(AFTER_LLM_APART) for line in render(persona, Match(topic, 0.0))
    )
    spoken = (line for spec in persona.topics.values() for line in spec.lines)
    return frozenset([*mood, *spoken])


def on_llm_thread(lines: Sequence[tuple[str | None, str]], persona: Persona) -> bool:
    """Whether the user's turn carries on the LLM's thread: the bot's last line was the
    LLM's kind (:func:`after_llm`), or only small talk's guesses (:func:`guess_lines`)
    stand between the turn and the LLM's line ("budget is about 1000 pounds" went to the
    LLM, "i mostly use premiere" got "Oh, tell me more! How did that come about?", and "my
    friend said macbooks are overpriced" is still about the laptop). Such a guess answered
    how the user's statement felt, or a word in it, not what it was about, so the user goes
    on with what the LLM was asked; a line of small talk's own matter (thanks, a nod, a
    joke, a favourite, its questions) or any other skill's ends the thread. ``lines``: the
    bot's lines, newest first, each with the skill that said it; up to
    :data:`THREAD_LINES` are read. On the six training sets, small talk's guesses from the
    mood two lines after the LLM's kind held 21 turns only the LLM fits and 6 of small
    talk's where a guess from the mood stood between."""
    guesses: frozenset[str] | None = None  # made only when small talk's line is read
    for skill, line in lines[:THREAD_LINES]:
        if after_llm(skill):
            return True
        if skill != "smalltalk":
            return False
        guesses = guess_lines(persona) if guesses is None else guesses
        if line not in guesses:
            return False
    return False


def thread_of(dialog: DialogView, persona: Persona) -> bool:
    """:func:`on_llm_thread` of the bot's lines in ``dialog``'s window."""
    lines = [(u.active_skill, u.text) for u in reversed(dialog.utterances) if u.speaker == "bot"]
    return on_llm_thread(lines, persona)
