"""Sentiment of the newest utterance, scored by VADER.

Output (under ``annotations["sentiment"]``)::

    {"label": "positive", "compound": 0.8398, "positive": 0.8, "neutral": 0.2, "negative": 0.0}

VADER (vaderSentiment) is a lexicon-and-rules scorer tuned for short, informal text: it
knows about negation ("not good"), intensifiers ("very"), capitals, "!!!" and emoticons,
needs no model download and scores an utterance in well under a millisecond, which is what
an annotator on every turn can afford. ``label`` uses VADER's own recommended cut-offs on
``compound``: >= 0.05 positive, <= -0.05 negative, neutral in between.
"""

from __future__ import annotations

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
    scores = _ANALYZER.polarity_scores(text)
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
