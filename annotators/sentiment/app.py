"""Sentiment of the newest utterance, scored by VADER.

Output (under ``annotations["sentiment"]``)::

    {"label": "positive", "compound": 0.8398, "positive": 0.8, "neutral": 0.2, "negative": 0.0}

VADER (vaderSentiment) is a lexicon-and-rules scorer tuned for short, informal text: it
knows about negation ("not good"), intensifiers ("very"), capitals, "!!!" and emoticons,
needs no model download and scores an utterance in well under a millisecond, which is what
an annotator on every turn can afford. ``label`` uses VADER's own recommended cut-offs on
``compound``: >= 0.05 positive, <= -0.05 negative, neutral in between.

One amendment to VADER's reading: a few words its lexicon scores as feelings of their own
are, in chat, mostly intensifiers of the next word ("pretty anxious", "super tired",
"damn good"). VADER adds their own score, so "I'm pretty anxious about my exam" read as
good news (+0.30) and small talk was glad for it. Before a word VADER scores, they are
read as its own intensifier "really" (:func:`as_vader_should_read`); alone or before any
other word ("she's pretty", "a pretty dress") they keep their score.

A second: "feeling" is in VADER's lexicon as a good thing (+0.5), so "im feeling kinda
down today" read as good news (+0.13; "down" is no feeling to VADER) and small talk
answered "That's great to hear!". "feeling" is read as "feel", which VADER does not
score, and where the user says how they feel (:data:`FEELS`) a mood VADER's lexicon does
not hold as one (:data:`MOODS`: "down", "blue") as the word it does ("low", "sad").

A third: words of stance VADER scores as good things ("honestly", "truly", :data:`STANCE`)
say how frankly the user speaks, not how they feel: "honestly a bit lonely so far" read as
good news (+0.13). Before a word VADER scores they are read as "really"; elsewhere as no
word.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from agent.sdk import DialogView, Service

#: Annotations kept, by text: chat repeats itself ("hi", "thanks", "ok"), and a repeated
#: text is annotated again for nothing (docs/performance.md, "Half the CPU").
KEPT = 1024
#: VADER's documented thresholds on the compound score.
POSITIVE_FROM = 0.05
NEGATIVE_FROM = -0.05

Label = Literal["positive", "neutral", "negative"]

# Reads VADER's lexicon files once; polarity_scores only reads them afterwards, so the one
# analyzer is safe to share between the SDK's worker threads.
_ANALYZER = SentimentIntensityAnalyzer()

#: Words in VADER's lexicon that chat mostly types as an intensifier of the next word; an
#: intensifier VADER already knows ("very", "so", "really") is in its own booster list and
#: needs nothing here.
INTENSIFIERS: frozenset[str] = frozenset(
    {
        "bloody",
        "crazy",
        "damn",
        "dead",
        "freaking",
        "horribly",
        "pretty",
        "ridiculously",
        "seriously",
        "super",
        "terribly",
        "wicked",
    }
)
_INTENSIFIED = re.compile(
    r"\b(" + "|".join(sorted(INTENSIFIERS)) + r")(\s+)([a-z']+)", re.IGNORECASE
)


#: Words of stance in VADER's lexicon as good things of their own ("honestly" +2.0,
#: "truly", "sincerely", "clearly", "surely"), which chat types to say how frankly it
#: speaks, not what it feels: "honestly a bit lonely so far" read as good news (+0.13),
#: and small talk smiled at it. Before a word VADER scores they intensify it, as
#: :data:`INTENSIFIERS` do ("truly awful"); elsewhere they are read as no word.
STANCE: frozenset[str] = frozenset({"honestly", "truly", "sincerely", "clearly", "surely"})
_STANCE = re.compile(r"\b(" + "|".join(sorted(STANCE)) + r")\b(,?\s*)", re.IGNORECASE)


#: Moods said with a word VADER's lexicon does not score, read as the word it does.
MOODS: dict[str, str] = {"down": "low", "blue": "sad"}
#: The user saying how they feel: the verb, words of degree as chat types them between
#: (some of VADER's boosters, "pretty" and "super" of :data:`INTENSIFIERS`, fillers such
#: as "just" and "still"), a mood of :data:`MOODS`.
FEELS = re.compile(
    r"\b(feel(?:s|ing)?|felt)((?:\s+(?:kinda|kind of|a bit|a little|so|really|very|quite"
    r"|pretty|super|bit|just|still|all))*\s+)(" + "|".join(MOODS) + r")\b",
    re.IGNORECASE,
)
#: The one form of the verb VADER scores (+0.5, as if "a feeling" were good news).
_FEELING = re.compile(r"\bfeeling\b", re.IGNORECASE)


def _mood(match: re.Match[str]) -> str:
    verb, between, mood = match.groups()
    read = MOODS[mood.lower()]
    return verb + between + (read.upper() if mood.isupper() else read)


def _really(word: str) -> str:
    """VADER's own intensifier in place of ``word``, in capitals where it was (VADER reads
    capitals as emphasis)."""
    return "REALLY" if word.isupper() else "really"


def as_vader_should_read(text: str) -> str:
    """``text`` with each of :data:`INTENSIFIERS` that comes before a word VADER scores
    written as VADER's own intensifier "really" (in capitals where it was: VADER reads
    capitals as emphasis), so is a word of :data:`STANCE` before one (elsewhere it is
    left out), "feeling" as "feel", and a mood VADER does not score after the
    verb (:data:`FEELS`) as one it does."""

    def booster(match: re.Match[str]) -> str:
        word, space, scored = match.groups()
        if scored.lower() not in _ANALYZER.lexicon:
            return match.group(0)
        return _really(word) + space + scored

    def stance(match: re.Match[str]) -> str:
        # the words after it in the text being rewritten, not in ``text``: the intensifiers
        # before it may have changed its length ("crazy" -> "really")
        after = match.string[match.end() :].split(maxsplit=1)
        if after and after[0].lower().strip(".,!?") in _ANALYZER.lexicon:
            return _really(match.group(1)) + match.group(2)
        return ""

    intensified = _STANCE.sub(stance, _INTENSIFIED.sub(booster, text))
    return _FEELING.sub("feel", FEELS.sub(_mood, intensified))


class Sentiment(BaseModel):
    label: Label
    compound: float = Field(ge=-1.0, le=1.0)
    positive: float = Field(ge=0.0, le=1.0)
    neutral: float = Field(ge=0.0, le=1.0)
    negative: float = Field(ge=0.0, le=1.0)


def label_of(compound: float) -> Label:
    if compound >= POSITIVE_FROM:
        return "positive"
    if compound <= NEGATIVE_FROM:
        return "negative"
    return "neutral"


@lru_cache(maxsize=KEPT)
def score(text: str) -> Sentiment:
    scores = _ANALYZER.polarity_scores(as_vader_should_read(text))
    return Sentiment(
        label=label_of(scores["compound"]),
        compound=scores["compound"],
        positive=scores["pos"],
        neutral=scores["neu"],
        negative=scores["neg"],
    )


service = Service(
    "sentiment", description="Sentiment of the newest utterance (VADER).", never_changes_view=True
)


@service.annotator
async def annotate(dialog: DialogView) -> Sentiment:
    return score(dialog.last_utterance.text)


app = service.app
