"""Whether a turn asks something: the skills that answer questions (the FAQ, the knowledge
base) answer only those.

A question mark, or a question word among the first three words ("so what are you good
for then", "like what can u do tho", "explain how a backup works"), or opening a later
clause ("thanks, how do i back it up"). A statement shares
words with the docs as often as a question does ("Marek", "i failed my driving theory
test again", "ending test"), and a request for something to be made or done ("add a
docstring", "send me the last 5 dialogs as csv", "restart the smalltalk service") asks for
work, not for what the docs say: neither is answered by a passage or an FAQ entry. On the
five training sets' turns, every knowledge answer that fitted its turn asked something,
and 20 of the 43 that did not fit asked nothing (bench/journal/knowledge.md).
"""

from __future__ import annotations

import re

from shared import questions, spelling
from shared.tfidf import ENGLISH_STOP_WORDS

#: The question words proper.
_WH = r"what|what's|whats|who|who's|whom|whose|why|how|when|where|which"
#: The auxiliaries and verbs that ask wherever they open a clause; "will", "shall", "am",
#: "do", "show" and "list" ask only opening the turn (", do that", ", show me" tell), and
#: "am" only before its subject (:data:`shared.questions.AM_ASKING`: "I am Fatima" tells).
_ASKING_VERBS = r"can|could|would|should|is|are|does|did|tell|explain"
#: A question or a request to tell, by its question mark or a question word among its
#: first few words.
_ASKS = re.compile(
    rf"\?|^\W*(?:\w+\W+){{0,2}}?"
    rf"(?:{_WH}|{_ASKING_VERBS}|will|shall|{questions.AM_ASKING}|do|show|list)\b",
    re.IGNORECASE,
)


#: A question word opening a later clause, after a comma, a semicolon or a colon and a
#: word that joins clauses ("ok thanks, what about slack?" without its mark, "im new
#: here, so how do i add a skill"), or "any" and a noun opening the turn ("any plans to
#: support slack", "any docs on backups"): a question as plain as one opening the turn.
#: "any more", "any time", "any way" and "any day" open statements as often.
_ASKS_LATER = re.compile(
    rf"[,;:]\s*(?:(?:and|so|but|ok|okay|then|now|also|or)\s+)?(?:{_WH}|{_ASKING_VERBS})\b"
    r"|^\W*any\s+(?!more\b|time\b|way\b|day\b)\w+",
    re.IGNORECASE,
)


def asks(text: str) -> bool:
    """Whether ``text`` asks something: :data:`_ASKS` opening it, or
    :data:`_ASKS_LATER`."""
    return _ASKS.search(text) is not None or _ASKS_LATER.search(text) is not None


def asks_outright(text: str) -> bool:
    """Whether ``text`` opens as a question or a bid, or ends on a question mark
    (:data:`shared.questions.QUESTION_OR_BID`), as typed or read carefully
    (:func:`spelling.normalise`). An English question word opening a turn mostly in
    another language is that language's word: "do widzenia" is Polish for goodbye
    (:func:`spelling.mostly_english`); its question mark still asks."""
    if _ENDS_ASKING.search(text):
        return True
    opens = (
        questions.QUESTION_OR_BID.search(text) is not None
        or questions.QUESTION_OR_BID.search(spelling.normalise(text)) is not None
    )
    return opens and spelling.mostly_english(text)


#: A question mark ending the turn.
_ENDS_ASKING = re.compile(r"\?\s*$")


def asks_something(text: str) -> bool:
    """Whether the turn asks something, with its question mark anywhere or without one
    ("what games do you like", "how do i install you", "be honest is taylor swift
    overrated"): its question mark, or :func:`asks_outright`."""
    return "?" in text or asks_outright(text)


#: Words that name the bot a turn is addressed to: the second person, as typed or read
#: carefully (``u``, ``ur``, ``ya``), and the bot as a kind ("do bots get sore"). Not the
#: product's name: "does chorus work with mongo" asks about the software.
_THE_BOT = re.compile(r"\b(?:you|your|yours|yourself|u|ur|ya|you're|youre|bots?)\b", re.IGNORECASE)
#: What makes a question to the bot more than a yes or no on its own life: a question word
#: ("what do you even say at a funeral", "so which one are you": the bot's view, advice, a
#: choice), a bid for what it can do ("can you do a practice question with me", "could u
#: ..."), or a word pointing back at what was said before ("have u watched it", "did you
#: like that one"): the subject is the conversation's, not the bot's.
_MORE_THAN_ITS_LIFE = re.compile(
    rf"\b(?:{_WH})\b|\b(?:can|could|will|would)\s+(?:you|u)\b"
    r"|\b(?:it|its|that|this|these|those|them|they|one|ones)\b",
    re.IGNORECASE,
)


def on_its_own_life(text: str) -> bool:
    """Whether ``text``, if it asks (:func:`asks_something`, which the caller has read
    already: it reads the turn carefully, the costlier part), asks the bot a yes or no
    about its own life: it names the bot (:data:`_THE_BOT`) and holds no question word,
    bid or word pointing back (:data:`_MORE_THAN_ITS_LIFE`): "do u have a doggy", "you
    ever tried kava?" and "do bots get sore" are such questions; "can you recommend a
    book?", "what did you do today" and "have u watched it" are not. Whether one is
    small talk's is the turn's reading's to say, not this."""
    return _THE_BOT.search(text) is not None and _MORE_THAN_ITS_LIFE.search(text) is None


#: A bid for the bot to make or do something, opening the turn or a later clause: "can
#: you generate the pipeline.json for me", "could u write me a skill that ...", "show me
#: the last three turns", "what tools do I need, make me a list": asked as a question, it
#: wants work, not what the docs say. Telling, explaining and helping are what a question
#: asks for ("can you explain how a backup works?").
_BIDS_FOR_WORK = re.compile(
    r"(?:^|[,;:.!?]\s)\W*(?:(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+)?"
    r"(?!tell\b|explain\b|help\b)\w+|(?:show|give|send|write|make)\s+me\b)",
    re.IGNORECASE,
)


def bids_for_work(text: str) -> bool:
    """Whether ``text`` opens with a bid for the bot to make or do something
    (:data:`_BIDS_FOR_WORK`)."""
    return _BIDS_FOR_WORK.search(text) is not None


#: A bot's line that asked the user's name ("Hi! I'm Chorus. What's your name?", "And
#: your name, what is it?").
_ASKED_NAME = re.compile(r"\bname\b[^.!]*\?\s*$|\bwhat is it\?\s*$", re.IGNORECASE)
#: A bot's line that said why it asked the name ("Just so I know what to call you."),
#: which invites the name as the question did.
_WHY_NAME = re.compile(r"\bwhat to call you\b", re.IGNORECASE)


def asked_name(line: str) -> bool:
    """Whether the bot's ``line`` asked the user's name."""
    return _ASKED_NAME.search(line) is not None


def awaits_name(line: str) -> bool:
    """Whether the bot's ``line`` leaves the user's name to come: it asked the name, or
    said why it asked (:func:`asked_name`, :data:`_WHY_NAME`). A reply to such a line is
    the greeting's to read; after the greeting's other lines ("Nice to meet you, Ana!
    What would you like to talk about?", "Hello again, Ana!") the script waits for
    nothing, and the turn is anyone's."""
    return asked_name(line) or _WHY_NAME.search(line) is not None


#: Words a turn may hold and still ask about no subject of its own: whom it is asked of
#: (the bot, its name) and forms of "do" that scikit-learn's stop words lack.
BOTS_WORDS = frozenset({"bot", "chorus", "does", "did", "doing"})
#: English words a question holds, besides stop words, from which it asks about a subject
#: of its own (:func:`subject_words`).
SUBJECT_WORDS = 2


def subject_words(text: str, besides: frozenset[str] = frozenset()) -> int:
    """How many words of a subject of its own ``text`` holds: English words (the speller's
    dictionary) of four letters or more that are not stop words, the bot's
    (:data:`BOTS_WORDS`) nor ``besides``. Shorter words are as often another language's
    ("dey", "bem", "far"); "do you think AI can be conscious" has two ("think",
    "conscious"), "is this the help bot" one, "how's your day been" none: a greeting's
    usual company asks about the bot, not about a subject."""
    words = {w.split("'")[0] for w in re.findall(r"[a-z']+", text.lower())}
    own = words - ENGLISH_STOP_WORDS - BOTS_WORDS - besides
    return sum(len(w) >= 4 and spelling.is_english(w) for w in own)


#: A greeting opening a turn: "hi", "hello", "hey", "hiya", "howdy", "yo", "greetings".
GREETING = re.compile(r"^\W*(?:hi|hello|hey|hiya|howdy|yo|greetings)\b", re.IGNORECASE)
#: ... with the words that keep it company before the turn's own ("hi there,", "hello
#: chorus!", "hey bot -", "hi again."), up to the punctuation that ends it.
_GREETING_AND_COMPANY = re.compile(
    GREETING.pattern
    + r"(?:\s+(?:there|again|all|everyone|chorus|bot|robot))*"
    + r"\s*[,.!:;\-\u2013\u2014]*\s*",
    re.IGNORECASE,
)


def without_greeting(text: str) -> str:
    """``text`` with the greeting that opens it left out ("hi, is there a REST API?" -> "is
    there a REST API?"): a search for what the turn asks is not a search for "hi". A
    greeting alone is kept whole, for there is nothing else to read."""
    rest = _GREETING_AND_COMPANY.sub("", text, count=1)
    return rest if rest.strip() else text
