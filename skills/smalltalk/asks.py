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
  "where can i...", "why does it..."), or asks one after a clause of its own ("wait, is
  that actually true?"); help asked with "any", named first or said to be needed ("any
  idea why", "tips to sleep better after night shift", "I need some advice about my
  landlord"); the bot's view asked on the world ("do you think the bus will be late",
  "who do you reckon will win");
- :func:`requests`: an imperative ("add...", "write...", "give me 5 ideas") or the same
  asked politely ("can you translate..."), opening the turn or a later sentence or
  clause ("my essay is on bees, write me an intro"), unless what is asked is the bot
  itself ("tell me about yourself");
- :func:`on_a_subject`: "one about cats", "a joke about calendars": content on a subject
  the user names;
- :func:`asks_own_past`: a question on what the user said or has ("what did I...", "what's
  my...", "do you remember..."), which is memory: the greeting skill's for the name, the
  LLM's for the rest;
- who made the bot ("who actually built you?", "who's behind this?"): the FAQ's and the
  docs' answer, not the persona's identity line;
- a question of imagination about the bot ("would you rather be a cat or a dog", "if you
  could..."), which needs what no persona line holds;
- the bot set beside something else, asked ("are you smarter than siri?", "How are you
  different from a search engine?"): knowledge of the other thing, which silences every
  answer of small talk, its patterns' too ("how are you" is not asked there);
- something of the user's that does not work ("my laptop wont turn on"), which asks for
  help however it is said;
- :func:`follows_up`: right after the LLM's answer, a question that does not address the
  bot ("biggest city?");
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

from shared import spelling
from shared.questions import AM_ASKING
from skills.smalltalk.matchers import introduces

_I = re.IGNORECASE
#: Words a turn may open with before what it asks ("ok so why does it...").
_LEAD = r"^\W*(?:(?:and|so|but|ok|okay|oh|well|hey|then|now|also|no|right|please|pls|just)\W+)*"
#: The kinds of thing a user wonders the bot is, in the third person ("is this a real
#: person", "is this an ai thing", "being a bot").
_AGENT = (
    r"(?:real\s+)?(?:person|human|people|bot|robot|ai|chat\s?bot|computer|machine"
    r"|program(?:me)?|chat\s?gpt|gpt)\b"
)
#: The bot addressed: a question with it is about the bot, which small talk answers. It
#: is addressed in the second person, by its name, or in the third person as whoever is
#: at the other end of the chat: "is this a real person typing?", "who am I talking to",
#: "whos on the other end of this", "is someone there", "what's it like being a bot",
#: "who is this". Those ask who the bot is, not about the world.
_ADDRESSES_BOT = re.compile(
    r"\b(?:you|your|yours|yourself|u|ur|urs|ya|chorus)\b"
    r"|\b(?:am\s+i|i'?m|i\s+am|are\s+we)\s+(?:talking|speaking|chatting|writing|texting)"
    r"\s+(?:to|with)\b"
    r"|\bother\s+end\b"
    r"|\b(?:any|some)\s?(?:one|body)\s+(?:(?:there|here)\b(?!\s+(?:to|who|that|at|in|with)\b)|(?:reading|typing|answering)\b)"
    r"|\b(?:person|human|some\s?(?:one|body))\s+(?:reading|typing|answering|replying)\b"
    r"|\bthis\s+(?:an?\s+)?"
    + _AGENT
    + r"|\bbeing\s+an?\s+"
    + _AGENT
    + r"|^\W*(?:\w+\W+)?(?:who|what)(?:'?s|\s+is)\s+this\W*$",
    _I,
)
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
#: A yes-or-no question after a clause of its own, its subject not the bot ("wait, is that
#: actually true?"): the auxiliary opens the clause that the question mark closes.
_AUX_LATER = re.compile(
    r"[,;:.!?]\s*(?:is|are|was|were|can|could|would|will|should|do|does|did)\s+"
    r"(?!you\b|u\b|ya\b|ye\b|yourself\b)\w+[^?.!]*\?",
    _I,
)
#: ... or with its question mark dropped, after a lead of its own and a comma or a "but"
#: ("ok honest opinion, should i cut a fringe", "random question but is it rude to..."):
#: the auxiliary then has a subject of its own.
_AUX_AFTER_COMMA = re.compile(
    r"(?:,|\bbut)\s*(?:is|are|was|were|can|could|should|does|did)\s+(?:i|it|he|she|we|they|this|that"
    r"|there|the|a|an|my|his|her|their|our)\b",
    _I,
)
#: A question word opening a sentence after one of its own ("really? where does that come
#: from", "wait, is that true? how?").
_WH_NEXT = re.compile(
    r"[.!?]\s*(?:what|what's|whats|who|who's|why|how|when|where|which)\b(?!\s+an?\b)", _I
)
#: Help asked with "any": "any idea why", "any tips?", "any good horror movies for a
#: sleepover" (a recommendation); or named first, as a heading ("tips to sleep better
#: after night shift", "ideas for a first date").
_ANY_HELP = re.compile(
    r"(?:^|[,;:.!?]\s*)(?:(?:so|and|ok|okay|also|or)\s+)?(?:got\s+)?any\s+"
    r"(?:ideas?|tips?|advice|suggestions?|recommendations?|good|gud|decent|nice)\b"
    r"|^\W*(?:(?:so|and|ok|okay|also|some)\s+)?(?:tips?|ideas?|advice|suggestions?"
    r"|recommendations?)\s+(?:for|to|on|about|how)\b",
    _I,
)
#: The bot's kind named as a subject ("do bots get tired", "can robots dream", "are
#: chatbots lonely"): a question on the bot's nature, which the persona answers. "AI" is
#: left out: "can AI replace doctors" asks about the world.
_BOTS_KIND = r"(?:an?\s+)?(?:bots?|robots?|chat\s?bots?)\b"
#: An auxiliary opening the turn, its subject not the bot nor its kind ("is the film any
#: good?", "can i..."). "have a nice day" wishes, so "have" is left out.
_AUX = re.compile(
    _LEAD
    + r"(?:is|are|was|were|can|could|would|will|should|shall|do|does|did|"
    # "am" before its subject only: "am good bro" tells
    + AM_ASKING
    + r")\s+"
    r"(?!you\b|u\b|ya\b|ye\b|yourself\b|" + _BOTS_KIND + r")\w+",
    _I,
)
#: The verbs of a task for the bot, asked as an imperative or politely.
_TASK = (
    r"tell|give|write|make|add|translate|explain|show|list|find|teach|recommend|suggest"
    r"|create|plan|draft|compose|summari[sz]e|convert|calculate|compute|describe|send|print"
    r"|repeat|book|remind|fix|correct|check|compare|rewrite|generate|put|change|count|spell"
    r"|define|say"
)
#: An imperative opening the turn: a task for the bot, or a few verbs that only an
#: imperative asks with ("help me...", "pretend...", "reply with...").
_REQUEST = re.compile(
    _LEAD + r"(?:" + _TASK + r"|ignore|help|pretend|imagine|reply|respond|turn|rephrase|prove)\b",
    _I,
)
#: The same task asked politely ("can you translate ... into mandarin", "could u write a
#: poem"): a modal, the bot, and a verb of the task; "can you help me?" asks what the bot
#: can do, so "help" is left to the imperative.
_POLITE_REQUEST = re.compile(
    _LEAD + r"(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+|pls\s+)?(?:" + _TASK + r")\b",
    _I,
)
#: The same, opening a later sentence or clause ("I need a name for my knitting shop. Give
#: me 5 ideas.", "my topic is social media, give me an outline", "I need a strong password
#: idea, can you make one", "hello, can you help me with my homework?"): a task is a task
#: wherever the turn asks it; "hi, can you help me?" asks what the bot can do.
_REQUEST_LATER = re.compile(
    r"[.!?,;:]\s*(?:(?:and|so|now|then|just|please|pls|ok|okay)\s+)*(?:(?:can|could|would|will)"
    r"\s+(?:you|u)\s+(?:please\s+|pls\s+)?)?(?:(?:" + _TASK + r")\b|help\s+me\s+\w)",
    _I,
)
#: Help the user says they need ("I need some advice: my flatmate never cleans", "need
#: help with my order", "looking for tips on..."): content the bot does not hold (label
#: rule 1), in whatever form it is asked.
_NEEDS_HELP = re.compile(
    r"\b(?:need|needs|needed|want|wanted|looking\s+for|could\s+use)\s+(?:some\s+|a\s+|an\s+"
    r"|your\s+|ur\s+|a\s+bit\s+of\s+|more\s+)?(?:advice|tips?|help|ideas?|suggestions?"
    r"|recommendations?)\b",
    _I,
)
#: The bot's view asked on something beyond it ("do you think free will actually exists?",
#: "do u think thats fair?", "do you reckon it's gonna be a cold winter", "who do you
#: reckon wins the world cup"): a judgement of the world, the LLM's (label rules 1 and 8);
#: an opinion on a thing ("what do you think about cats?", "do you like board games?") is
#: not asked so.
_ASKS_VIEW = re.compile(
    r"\b(?:do|did|d|don't|dont)\W*(?:you|u|ya)\s+(?:really\s+|honestly\s+)?"
    r"(?:think|reckon)\b(?!\s+(?:about|of|so)\b)(?=\s+\w)"
    r"|\b(?:who|which|what)\s+(?:\w+\s+)?(?:do|would)\s+(?:you|u|ya)\s+reckon\b",
    _I,
)
#: The bot set beside something else, asked ("are you smarter than siri?", "How are you
#: different from a search engine?"): knowledge of the other thing, label rule 8; "older
#: than you lol, 34" says, and asks nothing.
_COMPARES = re.compile(
    r"^\W*(?:(?:so|and|but|ok|okay|honestly|seriously|really)\W+)*(?:are|r|is|how|what|in\s+what)"
    r"\b[^?]*\b(?:you|u|chorus)\b[^?]*\b(?:than|different\s+from|compared\s+to|better\s+at)\b",
    _I,
)
#: A question of imagination about the bot ("would you rather be a cat or a dog", "if you
#: could go anywhere..."): label rule 8 gives it the LLM; no persona line imagines.
_HYPOTHETICAL = re.compile(
    r"\bwould\s+(?:you|u)\s+rather\b|\bif\s+(?:you|u)\s+(?:could|were|had|was)\b", _I
)
#: What is asked is the bot itself: "tell me about yourself".
_ABOUT_BOT = re.compile(
    r"\babout\s+(?:you|yourself|u)\b"
    # ... or the bot's own, asked first: "can you tell me your name?", "tell me what you like"
    r"|" + _LEAD + r"(?:(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+)?)?"
    r"(?:tell|say|show)\s+(?:me|us)\s+(?:your|ur|what\s+(?:you|u)|who\s+(?:you|u))\b",
    _I,
)
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

#: Something of the user's that does not work ("my laptop wont turn on", "my phone keeps
#: saying storage full", "tried counting sheep, doesnt work"): help is wanted, which no
#: line of interest or sympathy gives. Not a person's trouble ("cant sleep", "she stopped
#: eating"), which small talk's sympathy fits.
_TROUBLE = re.compile(
    r"\b(?:won'?t|wont|doesn'?t|doesnt|does\s+not|isn'?t|isnt|is\s+not|can'?t|cant)\s+(?:\w+\s+)?"
    r"(?:turn(?:ing)?\s+on|charg\w*|load\w*|boot\w*|connect\w*|start\w*|open\w*|work(?:ing|s)?)\b"
    r"|\bkeeps?\s+(?:crash|freez|drop|say|show|restart|flash|beep|disconnect|buffer)\w*"
    r"|\b(?:stopped|stops)\s+working\b|\bnot\s+working\b",
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
    "asks_the_world",
    "requests",
    "on_a_subject",
    "asks_own_past",
    "asks_the_maker",
    "narrows",
    "imagines",
    "reports_trouble",
    "compares",
    "follows_up",
    "introduces",
]


def asks_the_world(text: str) -> bool:
    """A question that does not address the bot ("who invented the skateboard?"), or help
    asked with "any" ("my wifi keeps dropping, any idea why"). A question after a clause
    of its own is read alone: "hi chorus! how far is the moon?" names the bot before it."""
    if _ANY_HELP.search(text) or _NEEDS_HELP.search(text) or _ASKS_VIEW.search(text):
        return True
    if (
        (_WH.search(text) or _AUX.search(text))
        and not _ADDRESSES_BOT.search(text)
        # an English question word opening another language's words is theirs: "do
        # widzenia" (Polish for goodbye) asks nothing
        and ("?" in text or spelling.mostly_english(text))
    ):
        return True
    later = (
        _WH_LATER.search(text)
        or _AUX_LATER.search(text)
        or _AUX_AFTER_COMMA.search(text)
        or _WH_NEXT.search(text)
    )
    return later is not None and not _ADDRESSES_BOT.search(text[later.start() :])


def requests(text: str) -> bool:
    """An imperative, unless the bot itself is what is asked ("tell me about yourself")."""
    asked = _REQUEST.search(text) or _POLITE_REQUEST.search(text) or _REQUEST_LATER.search(text)
    return bool(asked) and not _ABOUT_BOT.search(text)


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


def follows_up(text: str) -> bool:
    """A question that does not address the bot ("biggest city?", "so it's not because
    they're hungry?"): right after the LLM's answer, a question on what it said, the LLM's
    to answer (label rule 9). On the six training sets, 66 such turns after the LLM's (or
    the fallback's) line were labelled for the LLM alone, 4 for small talk (jokes and facts
    asked for, which small talk's specific answers keep)."""
    return "?" in text and not _ADDRESSES_BOT.search(text)


def beyond_small_talk(text: str, after_llm: bool = False) -> Beyond | None:
    """Which of the kinds of turn no small-talk line answers ``text`` is (spelling
    normalised, :func:`shared.spelling.normalise`), or None. ``after_llm``: the bot's last
    line was the LLM's kind of answer (:data:`shared.reading.LLM_KIND`), after which a
    fragment that narrows a request (:func:`narrows`) and a question on its answer
    (:func:`follows_up`) are the LLM's too."""
    if introduces(text):  # a name, in any clause: the greeting's
        return "introduces"
    if asks_own_past(text):
        return "asks_own_past"
    if _COMPARES.search(text):
        return "compares"
    if _MAKER.search(text):
        return "asks_the_maker"
    if asks_the_world(text):
        return "asks_the_world"
    if on_a_subject(text):  # before a request: "can you tell me a fun fact about sharks"
        return "on_a_subject"
    if requests(text):
        return "requests"
    if _HYPOTHETICAL.search(text):
        return "imagines"
    if _TROUBLE.search(text):
        return "reports_trouble"
    if after_llm and narrows(text):
        return "narrows"
    if after_llm and follows_up(text):
        return "follows_up"
    return None
