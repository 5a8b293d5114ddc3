"""What a turn asks for that no small-talk line can give: facts, a task, or the user's own past.

Small talk answers from a persona, a chit-chat corpus and a few guesses from the mood. Its
*specific* matchers say what they read ("how are you", "what's your favourite film", "tell
me a joke"); its *loose* ones answer by likeness (a corpus statement, a persona topic, an
intent read by similarity, the reading) or by the mood alone (empathy, "tell me more").
The loose ones answered, on the labelled sets, turns that only the LLM fits: a question
about the world ("who invented the skateboard?" got a corpus line on computers, "is the
film any good?" the persona's film line), a request ("add a part about him stealing
socks" got sympathy, "make the robot a bit sad" the bot's identity), a joke or a story on
a subject ("now one about cats"), a question about what the user said before ("What did
I tell you my hobby was?" got the bot's hobbies). None of those is a matter of phrasing
a curve can learn: each is in the turn's grammar, read here:

- :func:`asks_the_world`: a question that does not address the bot: it opens with a
  question word, or with an auxiliary whose subject is not "you" ("is the film...",
  "where can i...", "why does it..."), or asks one after a clause of its own; or help
  asked with "any" ("any idea why", "any good horror movies for a sleepover");
- :func:`requests`: an imperative ("add...", "write...", "give me 5 ideas"), unless what
  is asked is the bot itself ("tell me about yourself");
- :func:`on_a_subject`: "one about cats", "a joke about calendars": content on a subject
  the user names;
- :func:`asks_own_past`: a question on what the user said or has ("what did I...", "what's
  my...", "do you remember..."), which is memory: the greeting skill's for the name, the
  LLM's for the rest;
- who made the bot ("who actually built you?", "who's behind this?"): the FAQ's and the
  docs' answer, not the persona's identity line;
- :func:`narrows`: right after the LLM's answer, a fragment that narrows what the user
  asked for ("nah something funnier", "ok but like nutritionally", "and a dessert that is
  not too sweet", "less apologetic"): it opens on an indefinite pronoun, a comparative or
  a conjunction that adds to the request, and only the LLM knows what it narrows.

:func:`beyond_small_talk` names the first that holds. Small talk keeps its specific
answers on such turns (a joke asked for is still a joke), and lets its loose ones go, so
the turn goes to the LLM, or to the fallback's honest "I don't know" without one.
"""

from __future__ import annotations

import re
from typing import Literal

_I = re.IGNORECASE
#: Words a turn may open with before what it asks ("ok so why does it...").
_LEAD = r"^\W*(?:(?:and|so|but|ok|okay|oh|well|hey|then|now|also|no|right|please|pls|just)\W+)*"
#: The bot addressed: a question with it is about the bot, which small talk answers.
_ADDRESSES_BOT = re.compile(r"\b(?:you|your|yours|yourself|u|ur|ya|chorus)\b", _I)
#: A question word opening the turn; "what a day" and "how lovely" exclaim.
_WH = re.compile(
    _LEAD + r"(?:what|what's|whats|who|who's|whom|whose|why|how|how's|when|where|where's|which)"
    r"\b(?!\s+an?\b)",
    _I,
)
#: A question word after a clause of its own, in a question ("wait really, how many
#: languages can a chatbot speak?").
_WH_LATER = re.compile(
    r"[,;:]\s*(?:what|what's|whats|who|who's|why|how|when|where|which)\b(?!\s+an?\b)[^?]*\?\s*$",
    _I,
)
#: Help asked with "any": "any idea why", "any tips?", "any good horror movies for a
#: sleepover" (a recommendation).
_ANY_HELP = re.compile(
    r"(?:^|[,;:.!?]\s*)(?:(?:so|and|ok|okay|also|or)\s+)?(?:got\s+)?any\s+"
    r"(?:ideas?|tips?|advice|suggestions?|recommendations?|good|gud|decent|nice)\b",
    _I,
)
#: An auxiliary opening the turn, its subject not the bot ("is the film any good?",
#: "can i..."). "have a nice day" wishes, so "have" is left out.
_AUX = re.compile(
    _LEAD + r"(?:is|are|was|were|can|could|would|will|should|shall|do|does|did|am)\s+"
    r"(?!you\b|u\b|ya\b|ye\b|yourself\b)\w+",
    _I,
)
#: An imperative opening the turn: a task for the bot.
_REQUEST = re.compile(
    _LEAD + r"(?:tell|give|write|make|add|ignore|translate|explain|help|show|list|find|teach"
    r"|recommend|suggest|create|plan|draft|compose|summari[sz]e|convert|calculate|compute"
    r"|describe|send|print|repeat|book|remind|fix|correct|check|compare|rewrite|generate"
    r"|put|change|count|spell|define|pretend|imagine|say)\b",
    _I,
)
#: What is asked is the bot itself: "tell me about yourself".
_ABOUT_BOT = re.compile(r"\babout\s+(?:you|yourself|u)\b", _I)
#: Content on a subject the user names: "one about cats", "a joke about calendars", "a
#: fun fact about sharks" (the persona's facts have no subject: label rule 2's kin).
_ON_A_SUBJECT = re.compile(
    r"\b(?:one|joke|jokes|story|poem|song|something|more|fact|facts)\s+(?:about|on)\s+"
    r"(?!you\b|yourself\b|u\b)\w+",
    _I,
)
#: The user's own past or things, asked: memory.
_OWN_PAST = re.compile(
    r"\b(?:did\s+i|have\s+i|what(?:'s|\s+is|\s+was|\s+were)\s+my|do\s+you\s+remember)\b", _I
)

#: Who made the bot: the FAQ's and the docs' (label rule 8), not a persona line's; the
#: identity line read by similarity ("who are you?") answered "who actually built you?".
_MAKER = re.compile(
    r"\bwho\s+(?:\w+\s+){0,2}?(?:made|built|created|programmed|designed|wrote|coded|developed"
    r"|trained|owns|runs|maintains)\s+(?:you|u|this|it|chorus)\b|\bwho(?:'s|\s+is)\s+behind\b",
    _I,
)

#: A fragment narrowing a request: an indefinite pronoun ("something funnier", "one
#: without nuts"), a comparative ("less apologetic", "more chill ones"), "not too ...", or
#: a conjunction adding to the request ("and a dessert...", "but like nutritionally"),
#: after a word of assent or refusal ("ok", "nah", "yeah").
_NARROWS = re.compile(
    r"^\W*(?:(?:ok|okay|nah|no|yeah|yes|hmm|hm)\W+)?(?:but\s+)?"
    r"(?:something|anything|one|ones|and\s+(?:a|an|some|the)|less|more|not\s+too"
    r"|but\s+(?:not|like|what|how|more|less))\b",
    _I,
)

Beyond = Literal[
    "asks_the_world", "requests", "on_a_subject", "asks_own_past", "asks_the_maker", "narrows"
]


def asks_the_world(text: str) -> bool:
    """A question that does not address the bot ("who invented the skateboard?"), or help
    asked with "any" ("my wifi keeps dropping, any idea why")."""
    if _ANY_HELP.search(text):
        return True
    asked = _WH.search(text) or _AUX.search(text) or _WH_LATER.search(text)
    return bool(asked) and not _ADDRESSES_BOT.search(text)


def requests(text: str) -> bool:
    """An imperative, unless the bot itself is what is asked ("tell me about yourself")."""
    return bool(_REQUEST.search(text)) and not _ABOUT_BOT.search(text)


def on_a_subject(text: str) -> bool:
    """Content on a subject the user names: "now one about cats"."""
    return bool(_ON_A_SUBJECT.search(text))


def asks_own_past(text: str) -> bool:
    """A question on what the user said or has: "What did I tell you my hobby was?"."""
    return bool(_OWN_PAST.search(text)) and (
        text.rstrip().endswith("?") or bool(_WH.search(text) or _AUX.search(text))
    )


def narrows(text: str) -> bool:
    """A fragment narrowing a request ("nah something funnier", "ok but not mean mean"):
    right after the LLM's answer, the LLM's to read. On the five training sets, every
    such turn after the LLM's (or the fallback's) line was labelled for the LLM alone (37
    of 37)."""
    return bool(_NARROWS.search(text))


def beyond_small_talk(text: str, after_llm: bool = False) -> Beyond | None:
    """Which of the kinds of turn no small-talk line answers ``text`` is (spelling
    normalised, :func:`shared.spelling.normalise`), or None. ``after_llm``: the bot's last
    line was the LLM's kind of answer (:data:`shared.reading.LLM_KIND`), after which a
    fragment that narrows a request (:func:`narrows`) is the LLM's too."""
    if asks_own_past(text):
        return "asks_own_past"
    if _MAKER.search(text):
        return "asks_the_maker"
    if asks_the_world(text):
        return "asks_the_world"
    if requests(text):
        return "requests"
    if on_a_subject(text):
        return "on_a_subject"
    if after_llm and narrows(text):
        return "narrows"
    return None
