"""Small talk in the bot's own voice: how are you, what do you like, favourite things, bye.

Who the bot is comes from a persona (name, description, where it lives, likes, hobbies,
favourite things, and the templates of its lines). The persona belongs to the bot, so it
lives in the bot's attributes: when they hold none yet, the skill answers with the shipped
``persona.json`` and hands it back as ``bot_attributes={"persona": ...}``, which the agent
stores if this answer is chosen. A deployment customises its bot by putting a (partial)
persona in the bot's attributes or ``bot.persona``: its keys replace the file's, template by
template (:mod:`skills.smalltalk.persona`).

What the user said is recognised from ``annotations["intents"]`` when an intents annotator
ran (how_are_you, thanks, farewell, bot_identity, abilities) and from the skill's own
patterns, which also cover likes, hobbies, home and favourite things. With nothing matched,
a negative ``annotations["sentiment"]`` gets an empathetic line. The skill never repeats a
line the bot already said in the window when the template has another one.

A joke is told when asked for (:mod:`skills.smalltalk.jokes`), before anything else. With
no pattern matched, an opinion asked on a thing or a thing the user likes
(:mod:`skills.smalltalk.things`) gets a line that names it, good news about the user a glad
one; a corpus line or a persona topic beats these.

Anything else is looked up in an open dialog corpus (:mod:`skills.smalltalk.corpus`: the
English ``chatterbot-corpus``: food, books, films, feelings, ...): the answer of the
closest statement, scored by its similarity. Only when the corpus has nothing close does a
negative mood get the empathetic line.

When nothing of the skill's own answers, the turn's reading (:mod:`shared.reading`) may:
sure the turn is small talk's, with the intents annotator's intent one of small talk's,
the persona's line for that intent answers (:func:`by_reading`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any, Literal, cast

from agent.sdk import DialogView, Service, SkillHypothesis
from shared import reading, spelling
from shared.asking import awaits_name
from shared.calibration import calibrated
from skills.smalltalk import asks, jokes, things, topics, unread
from skills.smalltalk.corpus import THRESHOLD, CorpusIndex, build_index
from skills.smalltalk.lines import Match, Topic, pick, render
from skills.smalltalk.persona import Persona, persona_of
from skills.smalltalk.thread import (
    AFTER_LLM,
    AFTER_LLM_APART,
    FEELINGS,
    states_a_feeling,
    thread_of,
)

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
#: A joke asked for ("Tell me a joke", or "Another one?" after one): as sure as an intent
#: and a pattern agreeing.
JOKE_CONFIDENCE = 0.85
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
#: "I'm Sam", "I go by Lu": a name, which is the greeting skill's to take.
_INTRODUCES = re.compile(
    r"^\W*(?:(?:ok|okay|oh|well|so|fine|and)\W+)*(?:[Ii]'?m|[Ii] am|[Ii] go by|[Ii]t'?s|[Tt]his is)"
    r"\s+[A-Z]"
)
#: A corpus answer scores from CORPUS_BASE (similarity at the threshold) to
#: CORPUS_BASE + CORPUS_SPAN (an exact match): a close match beats an intent-only guess
#: at a persona line, a pattern that covers the utterance beats a loose match; above the
#: fallback's 0.1 and below the FAQ's confident answers.
CORPUS_BASE, CORPUS_SPAN = 0.5, 0.35
#: A persona topic found by meaning (:mod:`skills.smalltalk.topics`) scores like a corpus
#: answer: from TOPIC_BASE at the threshold to TOPIC_BASE + TOPIC_SPAN for an example's twin.
TOPIC_BASE, TOPIC_SPAN = 0.55, 0.3

_I = re.IGNORECASE
#: Checked in this order: the most specific question first ("thanks! what's your favourite
#: book?" is about the book; "thanks, bye" is a farewell).
PATTERNS: tuple[tuple[Topic, re.Pattern[str]], ...] = (
    (
        "favourite",
        re.compile(
            r"\b(?:what(?:'?s|\s+is|\s+are)\s+)?(?:your|you\s+have\s+an?|you\s+got\s+an?)"
            r"\s+fav(?:ou?rite|e)\s+([a-z]+)"
            # the same asked in a few words, the bot understood: "got a favourite colour?"
            r"|^\W*(?:got\s+)?(?:an?\s+|any\s+)?fav(?:ou?rite|e)\s+([a-z]+)\s*\?\s*$",
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


def match_pattern(text: str, favourites: Mapping[str, str]) -> Match | None:
    """The first of :data:`PATTERNS` found in ``text``."""
    for topic, pattern in PATTERNS:
        found = pattern.search(text)
        if found is None:
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
    return Match(
        intents["intent"],
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


#: A question or a request: what the user wants is an answer, not a reply to their mood.
_ASKS = re.compile(
    r"\?\s*$|^\W*(?:what|who|whom|whose|why|how|when|where|which|can|could|would|will|should"
    r"|shall|is|are|am|was|were|do|does|did|have|has|tell|give|help|explain|make|write"
    r"|recommend|suggest|show|list|find|teach)\b"
    # a question after a clause of its own: "my tomato plants have yellow leaves, whats wrong"
    r"|[,;:]\s*(?:what|what's|whats|why|how|is|are|should|can|could|do|does)\s+\w+\s+\w+",
    _I,
)


def empathy_evidence(text: str, annotations: Mapping[str, Any]) -> float:
    """How much a negative statement reads as the user's own bad mood, as the raw score of
    the empathy line (its calibration, answer type empathy, says what each score is worth):
    how negative the sentiment annotator found it (VADER's compound), and whether the user
    speaks of themselves. "I feel awful, I failed my exam" is both; "she's into true crime"
    is neither, though "crime" reads negative."""
    sentiment = annotations.get("sentiment")
    compound = sentiment.get("compound") if isinstance(sentiment, Mapping) else None
    strength = min(1.0, abs(float(compound))) if isinstance(compound, int | float) else 0.5
    own = bool(_FIRST_PERSON.search(text) or _OWN.search(text))
    return round(EMPATHY_BASE + EMPATHY_SPAN * strength + (EMPATHY_OWN if own else 0.0), 3)


def match_mood(text: str, annotations: Mapping[str, Any]) -> Match | None:
    """Empathy for a bad mood; for good news about the user, gladness; for anything else
    the user tells of themselves, interest. Only for a statement: a question ("How do I
    stop my cats scratching the sofa?") asks for an answer, whatever its mood."""
    if _ASKS.search(text) or not unread.mostly_english(text):
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
#: pattern, and their calibration says how often such readings were right.
CLOSER_LIKENESS = 0.4


def closer_by_likeness(text: str, annotations: Mapping[str, Any]) -> Match | None:
    """A goodbye or thanks read by likeness alone (the intents annotator's ``nearest``
    and ``likeness`` under its floor), never for a question."""
    intents = annotations.get("intents")
    if not isinstance(intents, Mapping) or text.rstrip().endswith("?") or _ASKS.search(text):
        return None
    nearest, likeness = intents.get("nearest"), intents.get("likeness")
    if nearest not in CLOSERS or not isinstance(likeness, int | float):
        return None
    if likeness < CLOSER_LIKENESS:
        return None
    return Match(nearest, round(float(likeness), 4), intent_only=True, by_likeness=True)


def answers_how_are_you(text: str, annotations: Mapping[str, Any]) -> Match | None:
    """A short reply, not a question, right after the bot asked how the user is ("pretty
    good actually", "meh, long day"): how they are, whatever its words. A bad mood gets
    the empathy line, a good one the persona's ``doing_well``; one with no feeling in it
    ("i'm jay") is not read as how they are."""
    if _ASKS.search(text) or len(_WORD.findall(text)) > REPLY_WORDS:
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
    if (
        by_intent
        and by_pattern
        and by_intent.topic == by_pattern.topic
        and by_intent.confidence >= SURE_INTENT
    ):
        return Match(by_pattern.topic, AGREEMENT_CONFIDENCE, by_pattern.thing)
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


class SmallTalkHypothesis(SkillHypothesis):
    """A hypothesis that says which smalltalk topic it answers."""

    smalltalk_topic: Topic
    #: the topic was read by likeness only (:func:`closer_by_likeness`)
    by_likeness: bool = False
    #: the topic was read from the annotator's intent by similarity alone
    by_similarity: bool = False


class JokeHypothesis(SkillHypothesis):
    """A joke of :mod:`skills.smalltalk.jokes`."""

    smalltalk_topic: Literal["joke"] = "joke"


#: The intents annotator's reading of a yes: its sure intent (0.7, the selector's floor),
#: or the intent the reply is most like from this likeness ("yeah go on then").
SURE_YES, YES_LIKENESS = 0.7, 0.5


def agrees(annotations: Mapping[str, Any]) -> bool:
    """The user says yes, as the intents annotator reads it (the one reading of an intent
    that the selector and the skills share)."""
    intents = annotations.get("intents")
    if not isinstance(intents, Mapping):
        return False
    if intents.get("intent") == "yes":
        return float(intents.get("confidence") or 0.0) >= SURE_YES
    return intents.get("nearest") == "yes" and float(intents.get("likeness") or 0.0) >= (
        YES_LIKENESS
    )


def tell_joke(dialog: DialogView, persona: Persona, said: list[str]) -> SkillHypothesis | None:
    """A joke not told lately when the user asks for one (or for more after one, or says
    yes to the offer of another); the offer of another when they laugh at one."""
    text = spelling.normalise(dialog.human_utterance.text)
    earlier = [u.text for u in dialog.utterances[:-1] if u.speaker == "bot"]
    offers = render(persona, Match("laughed", JOKE_CONFIDENCE))
    if jokes.wanted(text, earlier, offers, agrees(dialog.human_utterance.annotations)):
        seed = f"{dialog.dialog_id}:{dialog.human_utterance.utt_id}"
        return JokeHypothesis(text=jokes.pick(said, seed), confidence=JOKE_CONFIDENCE)
    if jokes.laughs(text, earlier):
        line = pick(offers, said)
        if line is not None:
            return SmallTalkHypothesis(
                text=line, confidence=JOKE_CONFIDENCE, smalltalk_topic="laughed"
            )
    return None


class CorpusHypothesis(SkillHypothesis):
    """A hypothesis from the corpus: which statement it answers, from which topic file."""

    smalltalk_topic: Literal["corpus"] = "corpus"
    corpus_statement: str
    corpus_category: str
    similarity: float


CORPUS: CorpusIndex = build_index()


def from_corpus(dialog: DialogView, said: list[str]) -> CorpusHypothesis | None:
    """The closest corpus statement's answer; among several, one not said lately, varied
    per dialog and turn (seeded, so a replay gives the same answers)."""
    found = CORPUS.best(spelling.normalise(dialog.human_utterance.text))
    if found is None:
        return None
    entry, similarity = found
    fresh = [a for a in entry.answers if a not in said] or entry.answers
    seed = f"{dialog.dialog_id}:{dialog.human_utterance.utt_id}"
    text = random.Random(seed).choice(fresh)
    share = (similarity - THRESHOLD) / (1.0 - THRESHOLD)
    return CorpusHypothesis(
        text=text,
        confidence=round(CORPUS_BASE + CORPUS_SPAN * min(1.0, share), 3),
        corpus_statement=entry.statement,
        corpus_category=entry.category,
        similarity=round(similarity, 3),
    )


class TopicHypothesis(SkillHypothesis):
    """A hypothesis on one of the persona's everyday topics, found by meaning."""

    smalltalk_topic: Literal["topic"] = "topic"
    topic: str
    similarity: float


def from_topics(dialog: DialogView, persona: Persona, said: list[str]) -> TopicHypothesis | None:
    """The persona's line on the topic closest in meaning, one not said lately."""
    found = topics.closest(spelling.normalise(dialog.human_utterance.text), persona.topics)
    if found is None:
        return None
    name, similarity = found
    text = pick(persona.topics[name].lines, said)
    if text is None:
        return None
    share = (similarity - topics.THRESHOLD) / (1.0 - topics.THRESHOLD)
    return TopicHypothesis(
        text=text,
        confidence=round(TOPIC_BASE + TOPIC_SPAN * min(1.0, share), 3),
        topic=name,
        similarity=round(similarity, 3),
    )


#: The bot attribute with the lines this skill said last, so a line does not come back
#: while the dialog has moved past the window the skill is sent; and how many it keeps.
RECENT = "smalltalk_recent"
RECENT_KEPT = 20


def recently_said(dialog: DialogView) -> list[str]:
    """What this skill said lately and what the bot said in the window, oldest first, each
    line once (at its latest place)."""
    kept = dialog.bot.attributes.get(RECENT)
    earlier = [line for line in kept if isinstance(line, str)] if isinstance(kept, list) else []
    lines = earlier + [u.text for u in dialog.utterances if u.speaker == "bot"]
    return list(reversed(dict.fromkeys(reversed(lines))))


#: The answer types read by likeness or from the mood, not by a matcher that says what it
#: read: they give way on a turn that asks for what no small-talk line holds
#: (:mod:`skills.smalltalk.asks`). A pattern's topic, a joke asked for, thanks and
#: goodbyes keep their answer there.
LOOSE_TOPICS: frozenset[str] = WEAK_TOPICS | {"laughed", "unread", "reaction"}


def loose(chosen: SkillHypothesis, answer_type: str) -> bool:
    """Whether ``chosen`` (of ``answer_type``) was found by likeness or from the mood: a
    corpus line, a persona topic, an intent read by similarity or likeness, a joke on a
    subject (the shipped jokes have none), a guess from the mood."""
    return (
        isinstance(chosen, CorpusHypothesis | TopicHypothesis)
        or getattr(chosen, "by_likeness", False)
        or getattr(chosen, "by_similarity", False)
        or answer_type == "joke_on_a_subject"
        or str(getattr(chosen, "smalltalk_topic", "")) in LOOSE_TOPICS
    )


def gives_way(
    chosen: SkillHypothesis, answer_type: str, beyond: asks.Beyond | None, persona: Persona
) -> bool:
    """Whether ``chosen`` is left out because the turn asks for what small talk has no
    line for (``beyond``): any answer to a question on the user's own past (memory) or one
    setting the bot beside something else ("How are you different from a search
    engine?" is no "how are you"), a loose answer to the rest. A persona topic whose own
    examples are requests ("tell me a fun fact") still answers a request, and a question
    on the LLM's answer ("got another fact?")."""
    if beyond is None:
        return False
    if beyond in ("asks_own_past", "compares"):
        return True
    if (
        beyond in ("requests", "follows_up")
        and isinstance(chosen, TopicHypothesis)
        and chosen.topic in persona.topics
        and any(asks.requests(e) for e in persona.topics[chosen.topic].examples)
    ):
        return False
    return loose(chosen, answer_type)


def respond(dialog: DialogView) -> SkillHypothesis | None:
    persona, store = persona_of(dialog.bot)
    said = recently_said(dialog)
    chosen = _respond(dialog, persona, store, said)
    text = spelling.normalise(dialog.human_utterance.text)
    thread = thread_of(dialog, persona)
    beyond = asks.beyond_small_talk(text, after_llm=thread)
    if chosen is not None:
        # the confidence as the chance that such an answer fits (shared/calibration.py)
        answer_type = str(getattr(chosen, "smalltalk_topic", ""))
        if answer_type == "joke" and jokes.on_a_subject(text):
            answer_type = "joke_on_a_subject"  # the shipped jokes seldom fit one
        if getattr(chosen, "by_likeness", False):
            answer_type = f"{answer_type}_by_likeness"
        elif getattr(chosen, "by_similarity", False):
            answer_type = f"{answer_type}_by_similarity"
        if isinstance(chosen, CorpusHypothesis):
            # a line of the bot's profile fits a question about the bot better than a
            # line of the science file fits a question of fact: one curve per file
            answer_type = f"corpus:{chosen.corpus_category}"
        if (
            answer_type in AFTER_LLM_APART
            and thread
            and not (answer_type in FEELINGS and states_a_feeling(text))
        ):
            # a guess from the mood on the LLM's thread: the user may be carrying on what
            # it was asked ("we were together four years"), calibrated apart; a feeling
            # the user states ("im so stressed about this exam") is small talk's there too
            answer_type = f"{answer_type}{AFTER_LLM}"
        if gives_way(chosen, answer_type, beyond, persona):
            return None  # a question of fact, a task, memory: the LLM's (or the fallback's)
        annotations = dialog.human_utterance.annotations
        if answer_type.endswith(AFTER_LLM) and not reading.stands_on_thread(
            "smalltalk", reading.of(annotations), reading.shipped()
        ):
            return None  # a guess on the LLM's thread the reading finds no surer than its
        chosen = calibrated(chosen, "smalltalk", answer_type, annotations)
    if chosen is None and beyond is None:  # own matcher silent: the reading may still say
        chosen = by_reading(dialog, persona, store, said, thread)
    if chosen is not None:  # remembered only if this answer is the one the bot gives
        recent = [line for line in said if line != chosen.text][-(RECENT_KEPT - 1) :]
        chosen.bot_attributes = {**chosen.bot_attributes, RECENT: [*recent, chosen.text]}
    return chosen


def replies_to_own_question(text: str, last_line: str, last_skill: str | None) -> bool:
    """The user's ``text`` is a statement right after this skill asked something (the
    bot's last line, ``last_line``, was small talk's and a question: "Do you have a
    hobby?", "What's yours?"): a reply, which small talk may acknowledge when the turn's
    reading agrees (:func:`by_reading`). A question of the user's own, or a name, is no
    such reply."""
    return (
        last_skill == "smalltalk"
        and last_line.rstrip().endswith("?")
        and _ASKS.search(text) is None
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


def nods_by_reading(text: str, last_skill: str | None, last_line: str | None = None) -> bool:
    """The user's ``text`` is a few words of a statement late in the conversation
    (:func:`skills.smalltalk.unread.few_words`: no question, no name), not right after
    the greeting's question (:func:`after_greeting_question`; a reply to it is the
    greeting's): the turn small talk nods to
    when the turn's reading is sure it is small talk's ("cheerio for now, my friend",
    "huh TIL", "tack så mycket!"). A question or a bid opening it ("tell me...") is no
    such turn. The caller asks only after a bot's line (never on the opening turn);
    ``last_skill`` is the skill that said it (None when the stored line does not say),
    ``last_line`` what it said."""
    return (
        not after_greeting_question(last_line, last_skill)
        and _ASKS.search(text) is None
        and _ASKS.search(spelling.normalise(text)) is None
        and unread.few_words(text)
    )


def states_by_reading(text: str, last_skill: str | None, last_line: str | None = None) -> bool:
    """The user's ``text`` is a statement of their own late in the conversation, of any
    length: no question or bid, no name given or said (:func:`unread.names_someone`), not
    right after the greeting's question (:func:`after_greeting_question`; a reply to it
    is the greeting's). Small talk answers
    it by its mood when the turn's reading is sure the turn is small talk's
    (:data:`shared.reading.STATE`): "it's pouring with rain here", "knackered tbh, been at
    work since six", "lol same, im always on my laptop". The caller asks only after a
    bot's line (never on the opening turn)."""
    return (
        not after_greeting_question(last_line, last_skill)
        and _ASKS.search(text) is None
        and _ASKS.search(spelling.normalise(text)) is None
        and _INTRODUCES.search(text) is None
        and not unread.names_someone(text)
    )


def stated_line(text: str, annotations: Mapping[str, Any]) -> Topic:
    """The line a statement small talk answers by the reading gets, by its mood: sympathy
    for a bad one, gladness for a good one, interest otherwise; a nod to words the
    sentiment annotator cannot read (another language: "nzuri sana, asante")."""
    if not unread.mostly_english(text):
        return "unread"
    label = mood(annotations)
    if label == "negative":
        return "empathy"
    return "glad" if label == "positive" else "about_user"


#: The answer type of a line chosen by the turn's reading (:func:`by_reading`).
BY_READING = "by_reading"


def by_reading(
    dialog: DialogView, persona: Persona, store: bool, said: list[str], thread: bool = False
) -> SkillHypothesis | None:
    """The persona's line for the intent the intents annotator reads (sure, or nearest),
    when the turn's reading is sure the turn is small talk's and that intent is one of
    its own (:func:`shared.reading.answer_by_reading`): "Are you a man or a machine?" is
    most like the bot-identity examples without a sure intent, and no pattern of this
    skill knows it. The confidence is the reading's probability, already a chance fitted
    on labelled turns (no curve of its own: the curves are fitted without the reading);
    ``routing`` says so for the inspector (``kind`` ``by_reading``)."""
    annotations = dialog.human_utterance.annotations
    intents = annotations.get("intents")
    last = dialog.bot_utterance
    found = reading.answer_by_reading(
        "smalltalk",
        reading.of(annotations),
        intents if isinstance(intents, Mapping) else {},
        reading.shipped(),
        question="?" in dialog.human_utterance.text,
        # a reply to one of small talk's guesses on the LLM's thread is the LLM's thread
        replying=last is not None
        and not thread
        and replies_to_own_question(dialog.human_utterance.text, last.text, last.active_skill),
        nodding=last is not None
        and nods_by_reading(dialog.human_utterance.text, last.active_skill, last.text),
        stating=last is not None
        and states_by_reading(dialog.human_utterance.text, last.active_skill, last.text),
        after_llm=thread,
    )
    if found is None:
        return None
    chance, intent = found
    if intent == reading.REPLY:  # a reply to small talk's own question: tell me more
        intent = "about_user"
    elif intent == reading.NOD:  # a few words of thanks, goodbye or reaction: a nod
        intent = "unread"
    elif intent == reading.STATE:  # a statement of the user's own: a line for its mood
        intent = stated_line(dialog.human_utterance.text, annotations)
    elif intent not in INTENT_TOPICS:  # a deployment's reading naming intents of its own
        return None
    topic = cast(Topic, intent)
    text = pick(render(persona, Match(topic, chance)), said)
    if text is None:
        return None
    hypothesis = SmallTalkHypothesis(
        text=text,
        confidence=chance,
        smalltalk_topic=topic,
        bot_attributes={"persona": persona.model_dump(mode="json")} if store else {},
    )
    routing = {"skill": "smalltalk", "kind": BY_READING, "raw": chance, "read": chance}
    setattr(hypothesis, "routing", routing)  # noqa: B010
    return hypothesis


def _respond(
    dialog: DialogView, persona: Persona, store: bool, said: list[str]
) -> SkillHypothesis | None:
    human = dialog.human_utterance
    joke = tell_joke(dialog, persona, said)
    if joke is not None:
        return joke
    # contractions and chat abbreviations read carefully; other words as typed, since a
    # thing the user names may be said back (shared/spelling.py)
    earlier = [u.text for u in dialog.utterances[:-1] if u.speaker == "bot"]
    asked_how = bool(earlier) and earlier[-1] in render(persona, Match("how_are_you", 0.0))
    match = understand(
        spelling.unabbreviate(human.text), human.annotations, persona.favourites, asked_how
    )
    if match is None or match.topic in WEAK_TOPICS or match.intent_only:
        # what the corpus or a persona topic says, when a pattern did not decide
        found = [h for h in (from_corpus(dialog, said), from_topics(dialog, persona, said)) if h]
        best = max(found, key=lambda h: h.confidence, default=None)
        if best is not None and (
            match is None or match.topic in WEAK_TOPICS or best.confidence > match.confidence
        ):
            return best
    # a reply to the greeting's question (the user's name) is the greeting's: no nod to it
    last = dialog.bot_utterance
    nods = bool(earlier) and (last is None or last.active_skill != "greeting")
    if match is None:
        # a short glad reaction ("nice one", "haha brilliant"): a nod (skills/smalltalk/unread.py)
        glad = unread.reaction(human.text, human.annotations, opening=not nods)
        match = None if glad is None else Match("reaction", glad)
    if match is None:
        # how the user is, in any words, asked back ("tutto bene grazie, and you?")
        back = unread.asks_back(human.text, opening=not earlier)
        match = None if back is None else Match("asked_back", back)
    if match is None:
        # a few words the bot does not read, late in the conversation ("gracias!",
        # "tschüss", "lmaooo"): thanks, a goodbye or a laugh, nodded to as well
        share = unread.unknown_share(human.text, opening=not nods)
        match = None if share is None else Match("unread", share)
    if match is None:
        return None
    text = pick(render(persona, match), said)
    if text is None:
        return None
    return SmallTalkHypothesis(
        text=text,
        confidence=match.confidence,
        smalltalk_topic=match.topic,
        by_likeness=match.by_likeness,
        by_similarity=match.by_similarity,
        bot_attributes={"persona": persona.model_dump(mode="json")} if store else {},
    )


service = Service(
    "smalltalk",
    description="Small talk in the voice of the bot's persona.",
    never_changes_view=True,
)


@service.skill
async def smalltalk(dialog: DialogView) -> list[SkillHypothesis]:
    hypothesis = respond(dialog)
    return [hypothesis] if hypothesis else []


app = service.app
# the spelling dictionary and the first names loaded at start-up, not on the first turn
spelling.warm()
unread.warm()
