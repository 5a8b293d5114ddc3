"""The bot's jokes: ``pyjokes``' neutral one-liners in English, less any the toxicity
annotator would flag.

Kept here, not in the smalltalk skill, because two readers need the same list: the skill
tells them, and the turn's reading (:mod:`shared.reading`) reads the bot's last line by its
kind when it is one of them. A joke's words (a shower, a bankruptcy, a cache) say nothing
about what the user will say next, and the reading, fitted on conversations where each
joke came up once or never, took them for a line only the LLM follows: "Another one?" or
"What is Chorus?" right after some jokes went to the LLM (or, without one, to the
fallback).

The package is on PyPI, BSD-licensed and kept since 2014; its jokes are about programming
and computers, which suit a bot made of services.
"""

from __future__ import annotations

import pyjokes

from shared.lexicon import BADWORDS_FILE, Lexicon

_BAD_WORDS = Lexicon.from_file(BADWORDS_FILE)
#: pyjokes' neutral jokes less the few the toxicity annotator flags ("ASCII stupid question,
#: get a stupid ANSI."): the response selector puts a flagged answer below every clean one,
#: so such a joke lost to the fallback's canned line.
JOKES: tuple[str, ...] = tuple(
    joke
    for joke in dict.fromkeys(pyjokes.get_jokes(language="en", category="neutral"))
    if not _BAD_WORDS.find(joke)
)
_KNOWN = frozenset(JOKES)


def is_joke(line: str) -> bool:
    """Whether ``line`` is one of the bot's jokes, as it told it."""
    return line in _KNOWN
