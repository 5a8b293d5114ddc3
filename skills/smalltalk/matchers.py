"""What small talk reads in the user's turn: its patterns, the intents annotator's intent,
an opinion asked or a thing liked, the mood of a statement, and the turns its reading may
answer (a reply to its own question, a few words to nod to, a statement of the user's own).

Each matcher gives a :class:`~skills.smalltalk.lines.Match` (or says whether a turn is of a
kind); :mod:`skills.smalltalk.app` turns them into lines and confidences. Kept apart from
the skill's corpus and services, so that what replays the skill's decisions (the
calibration bench) can read turns the same way without loading them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared import reading, spelling
from shared.asking import asks_outright, awaits_name
from shared.questions import QUESTION_OR_BID
from skills.smalltalk import things, unread
from skills.smalltalk.lines import Match, Topic

#: Intent names of ``annotations["intents"]`` that are small talk.
INTENT_TOPICS: frozenset[str] = frozenset(
    {"how_are_you", "thanks", "farewell", "bot_identity", "abilities"}
)

#: Confidences (see README): a pattern scores by the share of the utterance it covers, an
#: intent by the annotator's confidence; both agreeing is the strongest case.
PATTERN_BASE, PATTERN_SPAN = 0.65, 0.15
INTENT_BASE, INTENT_SPAN = 0.6, 0.2
AGREEMENT_CONFIDENCE = 0.85
#: An intent agrees with a pattern only when the annotator is sure of it (0.7, the skill
#: selector's floor): "How do I say goodbye in French?" holds a farewell's words, and the
#: annotator, seeing a question beyond them, is not sure.
SURE_INTENT = round(INTENT_BASE + INTENT_SPAN * 0.7, 3)
EMPATHY_CONFIDENCE = 0.6
#: The empathy line's raw score (:func:`empathy_evidence`): from EMPATHY_BASE, plus up to
#: EMPATHY_SPAN as VADER's compound is more negative, plus EMPATHY_OWN when the user speaks
#: of themselves; so its calibration can tell a user's own bad day from a sad word in a
#: story about someone else.
EMPATHY_BASE, EMPATHY_SPAN, EMPATHY_OWN = 0.4, 0.3, 0.2
#: Words that put the user in the statement wherever they stand ("feeling a bit lonely
#: tonight" has none at its start).
_OWN = re.compile(r"\b(?:i|i'm|im|i've|ive|my|me|myself|feeling|feel)\b", re.IGNORECASE)
#: A reply this short right after the bot asked how the user is says how they are, and
#: scores as sure as a pattern that covers most of it.
REPLY_WORDS = 6
REPLY_CONFIDENCE = 0.75
#: Good news about the user ("I'm happy today") scores as a bad mood does.
GLAD_CONFIDENCE = 0.6
#: "Do you like X?" on a thing the persona has nothing on: an honest "I haven't made up my
#: mind about X", the least sure answer of the skill (any corpus line or persona topic
#: beats it), above the fallback's 0.1.
OPINION_CONFIDENCE = 0.4
#: "I like pizza" with nothing else to say on pizza: asking what they like about it.
USER_LIKES_CONFIDENCE = 0.4
#: The topics a corpus line or a persona topic answers better, whatever their score: the
#: skill's guesses from the mood, its all-purpose opinion and interest in what the user
#: likes.
WEAK_TOPICS: frozenset[str] = frozenset({"empathy", "glad", "opinion", "user_likes", "about_user"})
#: The user tells of themselves in a neutral mood ("I mostly paint watercolours", "my
#: sourdough starter is called Gerald"): small talk asks for more. Scored as the other
#: guesses from the mood; what it is worth is the calibration's (shared/calibration.py).
ABOUT_USER_CONFIDENCE = 0.6
#: A statement in the first person: the user speaks of themselves, their day, their own.
_FIRST_PERSON = re.compile(
    r"^\W*(?:(?:well|so|oh|actually|honestly|today|just)\W+)?"
    r"(?:i|i'm|im|i've|i'd|i'll|my|mine|me|we|we're|we've|our|just)\b",
    re.IGNORECASE,
)
#: What gives a name: "I'm", "it's", "this is" or "I go by" before a capital, after a few
#: words that only lead in ("ok", "well").
_NAME_GIVEN = (
    r"(?:(?:ok|okay|oh|well|so|fine|and)\W+)*(?:[Ii]'?m|[Ii] am|[Ii] go by|[Ii]t'?s|[Tt]his is)"
    r"\s+[A-Z]"
)
#: "I'm Sam", "I go by Lu" opening the turn: a name, which is the greeting skill's to take.
_INTRODUCES = re.compile(r"^\W*" + _NAME_GIVEN)
#: The user giving their name, opening the turn or a later sentence or clause: "its Ty
#: lol", "Good thanks. I'm Aisha", "Thanks for asking, I'm Graham.", "I'm good too,
#: thanks! I'm Olivia"; a word in capitals ("I'm SO happy today") is no name. On the nine
#: training sets every such turn was the greeting's (a name in any form), and small
#: talk's thanks in some of them answered the turn instead of the greeting.
_GIVES_NAME = re.compile(r"(?:^|[.!?,;:])\s*" + _NAME_GIVEN + r"(?![A-Z])")


def introduces(text: str) -> bool:
    """Whether the user gives their name, opening the turn or a later clause
    (:data:`_GIVES_NAME`): the greeting's to take, whatever else the turn says."""
    return bool(_GIVES_NAME.search(text.replace("\u2019", "'")))


_I = re.IGNORECASE
#: Checked in this order: the most specific question first ("thanks! what's your favourite
#: book?" is about the book; "thanks, bye" is a farewell).
PATTERNS: tuple[tuple[Topic, re.Pattern[str]], ...] = (
    (
        "favourite",
        re.compile(
            r"\b(?:what(?:'?s|\s+is|\s+are)\s+)?(?:your|you\s+have\s+an?|you\s+got\s+an?)"
            # "your all-time fave book", "your favrite movie" (its common misspellings)
            r"\s+(?:all[\s-]+time\s+|very\s+|absolute\s+|top\s+)?fav(?:o?u?r?ite|e)?\s+([a-z]+)"
            # the same asked in a few words, the bot understood: "got a favourite colour?"
            r"|^\W*(?:got\s+)?(?:an?\s+|any\s+)?fav(?:o?u?r?ite|e)?\s+([a-z]+)\s*\?+\s*$",
            _I,
        ),
    ),
    # "do you like music?", "recommend a good book": answered only when the persona has a
    # favourite of that thing (see match_pattern); the corpus talks about the rest.
    (
        "favourite",
        re.compile(
            r"\b(?:do\s+you\s+(?:like|love|enjoy)|recommend\s+(?:me\s+)?(?:a|an|some|any)"
            r"\s+(?:good\s+|nice\s+)?|(?:are|r)\s+(?:you|u)\s+into)\s*([a-z]+)"
            # which of a kind the bot likes: "which season do you like best?", "what kind of
            # books do you like?"
            r"|\b(?:which|what)\s+(?:(?:kind|sort|type)\s+of\s+)?([a-z]+)\s+do\s+(?:you|u)"
            r"\s+(?:like|love|prefer|enjoy)\b",
            _I,
        ),
    ),
    (
        "hobbies",
        re.compile(
            r"\b(?:what(?:'?s|\s+is|\s+are)\s+your\s+|do\s+you\s+have\s+(?:any\s+|an?\s+)?)?"
            r"hobb(?:y|ies)\b|\bfor\s+fun\b|\b(?:free|spare)\s+time\b|\bpastimes?\b"
            r"|\bwhat\s+do\s+you\s+(?:like|love|enjoy)\s+doing\b",
            _I,
        ),
    ),
    (
        "home",
        re.compile(
            r"\bwhere\s+(?:are|r)\s+(?:you|u)\s+(?:from|based|located)\b"
            r"|\bwhere\s+do\s+you\s+(?:live|come\s+from)\b|\bwhere(?:'s|\s+is)\s+your\s+home\b",
            _I,
        ),
    ),
    (
        "likes",
        re.compile(
            r"\bwhat\s+(?:else\s+)?do\s+you\s+(?:like|love|enjoy)\b|\bwhat\s+are\s+you\s+into\b", _I
        ),
    ),
    (
        "abilities",
        re.compile(
            r"\bwhat\s+(?:can|could)\s+you\s+do\b|\bwhat\s+are\s+you\s+(?:able\s+to\s+do|good\s+at)\b"
            r"|\bhow\s+can\s+you\s+help\b",
            _I,
        ),
    ),
    (
        "bot_identity",
        re.compile(
            r"\btell\s+me\s+(?:more\s+)?about\s+yourself\b|\bintroduce\s+yourself\b"
            r"|\bwho\s+are\s+you\b|\bwhat\s+are\s+you\s*(?:[?!.]|$)"
            r"|\bwhat(?:'?s|\s+is)\s+your\s+name\b",
            _I,
        ),
    ),
    (
        "how_are_you",
        re.compile(
            r"\bhow\s+(?:are|r)\s+(?:you|u|ya)\b|\bhow\s+(?:have\s+you\s+been|do\s+you\s+do)\b"
            r"|\bhow(?:'s|\s+is)\s+(?:it\s+going|your\s+day|life)\b|\bhow\s+are\s+things\b",
            _I,
        ),
    ),
    # "I'm good, thanks": an answer to "how are you?", not thanks for anything.
    (
        "doing_well",
        re.compile(
            r"^\W*(?:(?:i'?m|i\s+am|im)\s+(?:doing\s+|feeling\s+)?|doing\s+)?(?:very\s+|really\s+)?"
            r"(?:good|fine|great|well|ok|okay|alright|not\s+bad)\b(?:\W+(?:thanks|thank\s+you|thx))?"
            r"\W*(?:(?:and|how\s+about|what\s+about)\s+(?:you|u)\W*)?$",
            _I,
        ),
    ),
    (
        "farewell",
        re.compile(
            r"\b(?:bye|goodbye|good\s+bye|bye\s+bye|(?<!to\s)see\s+(?:you|ya)|good\s+night|farewell"
            r"|take\s+care|gotta\s+go|talk\s+(?:to\s+you\s+)?later|ttyl)\b",
            _I,
        ),
    ),
    (
        "thanks",
        re.compile(r"\b(?:thanks|thank\s+(?:you|u)|thx|ty|cheers|much\s+appreciated)\b", _I),
    ),
)

#: Other words for the things a persona has favourites of: "colour" finds "color".
THING_ALIASES = {
    "colour": "color",
    "film": "movie",
    "song": "music",
    "band": "music",
    "meal": "food",
    "dish": "food",
    "pet": "animal",
}
_WORD = re.compile(r"\w+(?:'\w+)*")


def _coverage_confidence(match: re.Match[str], text: str) -> float:
    """A pattern that is most of the utterance ("how are you?") beats one inside a story."""
    covered = len(_WORD.findall(match.group()))
    share = min(1.0, covered / max(1, len(_WORD.findall(text))))
    return round(PATTERN_BASE + PATTERN_SPAN * share, 3)


#: A hobby of the user's, or one asked for ("whats a good hobby that costs nothing", "what
#: hobbies can i start at 72", "what did I tell you my hobby was?"): not the bot's, which
#: the persona's hobbies line answers. On the sixteen training sets every turn naming
#: hobbies that was small talk's asked the bot's, never with these words.
_USERS_HOBBY = re.compile(r"\b(?:i|my|me|someone|somebody)\b|\b(?:a|good|new|cheap)\s+hobb", _I)
#: ... unless the bot's are asked too ("do you have any hobbies? i like hiking").
_BOTS_HOBBY = re.compile(r"\b(?:your|yourself|ur|bots?|(?:you|u)\s+(?:have|got))\b", _I)


def users_hobby(found: re.Match[str], text: str) -> bool:
    """Whether the hobbies the pattern ``found`` names are the user's or asked for, not the
    bot's (:data:`_USERS_HOBBY`)."""
    return (
        "hobb" in found.group().lower()
        and _USERS_HOBBY.search(text) is not None
        and _BOTS_HOBBY.search(text) is None
    )


def match_pattern(text: str, favourites: Mapping[str, str]) -> Match | None:
    """The first of :data:`PATTERNS` found in ``text``."""
    for topic, pattern in PATTERNS:
        found = pattern.search(text)
        if found is None or (topic == "hobbies" and users_hobby(found, text)):
            continue
        confidence = _coverage_confidence(found, text)
        if topic == "favourite":
            thing = next(g for g in found.groups() if g).lower()
            known = favourite_key(thing, favourites)
            if known is None and "fav" not in found.group().lower():
                continue
            return Match("favourite" if known else "no_favourite", confidence, known or thing)
        return Match(topic, confidence)
    return None


def favourite_key(thing: str, favourites: Mapping[str, str]) -> str | None:
    """The persona's key for ``thing``: "colours" and "colour" find "color"."""
    for word in (thing, thing.removesuffix("s")):
        key = THING_ALIASES.get(word, word)
        if key in favourites:
            return key
    return None


#: The topics that close a conversation or answer the bot: inside a question of the user's
#: own ("How do I say goodbye in French?", "and see you tomorrow?") they are its subject.
CLOSERS: frozenset[str] = frozenset({"farewell", "thanks"})


#: A pattern's reading under this confidence explains only part of the turn (the intents
#: annotator's ``PARTIAL_CONFIDENCE``, under the skill selector's floor).
PARTIAL_BELOW = 0.7


def goodbye_also(intents: Mapping[str, Any]) -> bool:
    """Whether the intents annotator found a goodbye beside the intent it read ("thanks,
    bye" is thanks, a farewell also)."""
    also = intents.get("also")
    return isinstance(also, list) and "farewell" in also


def match_intent(annotations: Mapping[str, Any]) -> Match | None:
    """A smalltalk intent from the intents annotator, scored by its confidence."""
    intents = annotations.get("intents")
    if not isinstance(intents, Mapping) or intents.get("intent") not in INTENT_TOPICS:
        return None
    certainty = intents.get("confidence")
    certainty = float(certainty) if isinstance(certainty, int | float) else 0.0
    if intents.get("method") == "pattern" and certainty < PARTIAL_BELOW:
        # a pattern that explains only part of the turn, beside a question of its own
        # ("sup, should i get an iphone or a samsung"): under every floor, no intent
        return None
    certainty = min(1.0, max(0.0, certainty))
    topic = intents["intent"]
    if topic == "thanks" and goodbye_also(intents):
        # "thanks, bye", "thanks so much, see you tomorrow": the goodbye ends the
        # conversation, and "You're welcome!" left it open
        topic = "farewell"
    return Match(
        topic,
        round(INTENT_BASE + INTENT_SPAN * certainty, 3),
        intent_only=True,
        by_similarity=intents.get("method") == "similarity",
    )


def mood(annotations: Mapping[str, Any]) -> str | None:
    """The sentiment annotator's label ("positive", "neutral", "negative"), if it ran."""
    sentiment = annotations.get("sentiment")
    label = sentiment.get("label") if isinstance(sentiment, Mapping) else None
    return label if isinstance(label, str) else None


def match_opinion(text: str) -> Match | None:
    """An opinion asked on a thing ("Do you like sports?" -> "sports"), or something the
    user likes ("I like pizza" -> "pizza")."""
    asked = things.asked_about(text)
    if asked is not None:
        return Match("opinion", OPINION_CONFIDENCE, asked)
    liked = things.liked(text)
    return Match("user_likes", USER_LIKES_CONFIDENCE, liked) if liked is not None else None


def empathy_evidence(text: str, annotations: Mapping[str, Any]) -> float:
    """How much a negative statement reads as the user's own bad mood, as the raw score of
    the empathy line (its calibration, answer type empathy, says what each score is worth):
    how negative the sentiment annotator found it (VADER's compound), and whether the user
    speaks of themselves. "I feel awful, I failed my exam" is both; "she's into true crime"
    is neither, though "crime" reads negative."""
    sentiment = annotations.get("sentiment")
    compound = sentiment.get("compound") if isinstance(sentiment, Mapping) else None
    strength = min(1.0, abs(float(compound))) if isinstance(compound, int | float) else 0.5
    own = tells_of_their_own(text)
    return round(EMPATHY_BASE + EMPATHY_SPAN * strength + (EMPATHY_OWN if own else 0.0), 3)


def tells_of_their_own(text: str) -> bool:
    """Whether the user speaks of themselves or theirs ("I feel awful", "my cat is sick")."""
    return bool(_FIRST_PERSON.search(text) or _OWN.search(text))


def match_mood(text: str, annotations: Mapping[str, Any]) -> Match | None:
    """Empathy for a bad mood; for good news about the user, gladness; for anything else
    the user tells of themselves, interest. Only for a statement: a question ("How do I
    stop my cats scratching the sofa?") asks for an answer, whatever its mood."""
    if QUESTION_OR_BID.search(text) or not spelling.mostly_english(text):
        return None  # a question; or words VADER and the first person pattern cannot read
    label = mood(annotations)
    if label == "negative":
        return Match("empathy", empathy_evidence(text, annotations))
    if label == "positive" and things.about_themselves(text):
        return Match("glad", GLAD_CONFIDENCE)
    if _FIRST_PERSON.search(text) and not _INTRODUCES.search(text):
        return Match("about_user", ABOUT_USER_CONFIDENCE)
    return None


#: From this likeness to a goodbye's or a thank-you's examples, the intent the utterance is
#: most like is offered as a reading of its own (answer type ``<topic>_by_likeness``, the
#: likeness as its raw score): "later!", "right, I'm off, take it easy!" are like no
#: pattern, and their calibration says how often such readings were right. The reading's
#: own bar for a closer, so that the two cannot disagree on what a goodbye is.
CLOSER_LIKENESS = reading.CLOSER_FROM


def closer_by_likeness(text: str, annotations: Mapping[str, Any]) -> Match | None:
    """A goodbye or thanks read by likeness alone (the intents annotator's ``nearest``
    and ``likeness`` under its floor), never for a question nor for a bad mood: "bit
    nervous, got a job interview tomorrow" and "actually not that good, rough night at
    work" are near the goodbyes and are no goodbye."""
    intents = annotations.get("intents")
    if not isinstance(intents, Mapping) or QUESTION_OR_BID.search(text):
        return None
    if mood(annotations) == "negative":
        return None
    nearest, likeness = intents.get("nearest"), intents.get("likeness")
    if nearest not in CLOSERS or not isinstance(likeness, int | float):
        return None
    if likeness < CLOSER_LIKENESS:
        return None
    return Match(nearest, round(float(likeness), 4), intent_only=True, by_likeness=True)


def mentions_closer(text: str, by_intent: Match | None) -> bool:
    """Whether a goodbye's or a thank-you's words in ``text`` are what a question asks
    about, typed without its mark ("how do you say thank you in japanese", "can you
    translate 'see you next week' into mandarin", "should I sneak out or say goodbye"): the
    turn opens as a question (:func:`asks_outright`), and the intents annotator is not sure
    of that closer (``by_intent``), as it is of a wish that opens like one ("have a good
    night!"). On the eleven training sets' runs, all five such closers typed without the
    mark answered a turn only the LLM fitted."""
    sure = (
        by_intent is not None and by_intent.topic in CLOSERS and by_intent.confidence >= SURE_INTENT
    )
    return not sure and asks_outright(text)


def answers_how_are_you(text: str, annotations: Mapping[str, Any]) -> Match | None:
    """A short reply, not a question, right after the bot asked how the user is ("pretty
    good actually", "meh, long day"): how they are, whatever its words. A bad mood gets
    the empathy line, a good one the persona's ``doing_well``; one with no feeling in it
    ("i'm jay") is not read as how they are."""
    if QUESTION_OR_BID.search(text) or len(_WORD.findall(text)) > REPLY_WORDS:
        return None
    label = mood(annotations)
    if label == "negative":
        return Match("empathy", empathy_evidence(text, annotations))
    # a reply with no feeling in it ("i'm jay") says something else than how they are
    return Match("doing_well", REPLY_CONFIDENCE) if label == "positive" else None


def understand(
    text: str,
    annotations: Mapping[str, Any],
    favourites: Mapping[str, str],
    asked_how: bool = False,
) -> Match | None:
    """Intent and pattern together; an opinion asked, or the user's mood, only when
    nothing else matched. ``asked_how``: the bot's last line asked how the user is, so a
    short reply says how they are (:func:`answers_how_are_you`)."""
    text = text.replace("\u2019", "'")
    by_intent, by_pattern = match_intent(annotations), match_pattern(text, favourites)
    if text.rstrip().endswith("?"):  # a goodbye or thanks asked about is the question's subject
        by_intent = None if by_intent and by_intent.topic in CLOSERS else by_intent
        by_pattern = None if by_pattern and by_pattern.topic in CLOSERS else by_pattern
    if by_pattern and by_pattern.topic in CLOSERS and mentions_closer(text, by_intent):
        by_pattern = None
    if by_pattern and by_pattern.topic == "doing_well" and not asked_how and by_intent:
        # "ok thanks!" is "I'm good, thanks" only to "how are you?"; after anything else it
        # is what the intents annotator reads ("Glad to hear it!" answered a thank-you)
        by_pattern = None
    if (
        by_intent
        and by_intent.by_similarity
        and by_intent.topic in CLOSERS
        and QUESTION_OR_BID.search(text)
    ):
        # near a goodbye's example, asked without a question mark: "do you sleep at night
        # or what" is like "good night, sleep well" and asks the bot something
        by_intent = None
    if (
        by_intent
        and by_pattern
        and by_intent.topic == by_pattern.topic
        and by_intent.confidence >= SURE_INTENT
    ):
        return Match(by_pattern.topic, AGREEMENT_CONFIDENCE, by_pattern.thing)
    if by_pattern and by_intent and by_intent.by_similarity and by_intent.topic != by_pattern.topic:
        # a pattern read the turn's own words; an intent found only by likeness to other
        # examples is the looser reading: "What do you do for fun?" is the hobbies'
        # pattern, though like "what do you know how to do" (abilities, 0.55)
        return by_pattern
    candidates = [m for m in (by_pattern, by_intent) if m is not None]
    if candidates:
        return max(candidates, key=lambda m: m.confidence)
    replied = answers_how_are_you(text, annotations) if asked_how else None
    return (
        replied
        or closer_by_likeness(text, annotations)
        or match_opinion(text)
        or match_mood(text, annotations)
    )


def replies_to_own_question(text: str, last_line: str, last_skill: str | None) -> bool:
    """The user's ``text`` is a statement right after this skill asked something (the
    bot's last line, ``last_line``, was small talk's and a question: "Do you have a
    hobby?", "What's yours?"): a reply, which small talk may acknowledge when the turn's
    reading agrees (:func:`skills.smalltalk.app.by_reading`). A question of the user's
    own, or a name, is no such reply."""
    return (
        last_skill == "smalltalk"
        and last_line.rstrip().endswith("?")
        and QUESTION_OR_BID.search(text) is None
        and _INTRODUCES.search(text) is None
    )


def after_greeting_question(last_line: str | None, last_skill: str | None) -> bool:
    """Whether the bot's last line is the greeting's and leaves the name to come
    (:func:`shared.asking.awaits_name`: it asked the name, or said why it asks): a reply
    to it is the greeting's. After the greeting's other lines ("Nice to meet you, Ana!
    What would you like to talk about?") the script waits for nothing, and a statement
    there ("ça va bien, merci", "honestly having a rough week") is small talk's as
    anywhere later. A greeting's line not known (None) counts as asking."""
    return last_skill == "greeting" and (last_line is None or awaits_name(last_line))


#: A few words that bid for more rather than react: "please" in them ("Nothing too sad
#: please"), or opening on "now" or "another" ("ok now a pun about cheese", "now a shorter
#: version for the card", "ha. another cheese one"): the next thing asked for, no thanks.
_BIDS = re.compile(
    r"\b(?:please|pls|plz)\b"
    r"|^\W*(?:(?:ok|okay|ha|haha|and|oh|right)\W+)*(?:now|another)\b(?!\s+(?:i|i'm|im|we)\b)",
    re.IGNORECASE,
)


def nods_by_reading(text: str, last_skill: str | None, last_line: str | None = None) -> bool:
    """The user's ``text`` is a few words of a statement late in the conversation
    (:func:`skills.smalltalk.unread.few_words`: no question, no name), not right after
    the greeting's question (:func:`after_greeting_question`; a reply to it is the
    greeting's): the turn small talk nods to
    when the turn's reading is sure it is small talk's ("cheerio for now, my friend",
    "huh TIL", "tack så mycket!"). A question or a bid opening it ("tell me...") is no
    such turn, nor a bid for more (:data:`_BIDS`). The caller asks only after a bot's
    line (never on the opening turn);
    ``last_skill`` is the skill that said it (None when the stored line does not say),
    ``last_line`` what it said."""
    return (
        not after_greeting_question(last_line, last_skill)
        and not asks_outright(text)
        and _BIDS.search(text) is None
        and unread.few_words(text)
    )


def states_by_reading(text: str, last_skill: str | None, last_line: str | None = None) -> bool:
    """The user's ``text`` is a statement of their own late in the conversation, of any
    length: no question or bid, no name given or said (:func:`unread.names_someone`), not
    right after the greeting's question (:func:`after_greeting_question`; a reply to it
    is the greeting's), nor a bid for more (:data:`_BIDS`). Small talk answers it by its
    mood when the turn's reading is sure the turn is small talk's
    (:data:`shared.reading.STATE`): "it's pouring with rain here", "knackered tbh, been at
    work since six", "lol same, im always on my laptop". The caller asks only after a
    bot's line (never on the opening turn)."""
    return not after_greeting_question(last_line, last_skill) and _states(text)


def states_after_name_question(
    text: str, last_skill: str | None, last_line: str | None = None
) -> bool:
    """The user's ``text`` is a statement of their own, as :func:`states_by_reading`
    reads one, right after the greeting's name question (:func:`after_greeting_question`):
    how they are, where the greeting asked the name after a "wassup" ("nm just chillin",
    "am good bro, tired little", "mi gud nomo"), or news of their own ("turning 30 eek").
    A name is the greeting's, and no name is in such a turn (:func:`unread.names_someone`,
    :data:`_INTRODUCES`); small talk answers it by its mood only where the turn's reading
    is surer still that it is small talk's (:data:`shared.reading.GREETED_FROM`), since
    most replies there are names in forms no pattern reads."""
    return after_greeting_question(last_line, last_skill) and _states(text)


def _states(text: str) -> bool:
    """``text`` is a statement of the user's own: no question or bid, no name given or
    said, no bid for more."""
    return (
        not asks_outright(text)
        and _INTRODUCES.search(text) is None
        and _BIDS.search(text) is None
        and not unread.names_someone(text)
    )


def stated_line(text: str, annotations: Mapping[str, Any]) -> Topic:
    """The line a statement small talk answers by the reading gets, by its mood: sympathy
    for a bad one, gladness for a good one, interest in a longer one with none, a nod to
    a few words with none and to words the sentiment annotator cannot read (another
    language: "nzuri sana, asante")."""
    if not spelling.mostly_english(text):
        return "unread"
    label = mood(annotations)
    if label == "negative":
        return "empathy"
    if label == "positive":
        return "glad"
    # a few words with no feeling ("ok that makes sense", "lol same") tell no story to ask
    # about: a nod
    return "unread" if unread.few_words(text) else "about_user"
