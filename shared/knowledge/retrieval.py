"""What a retrieval service answers, and how a search becomes a probability.

:class:`Retrieved` is the annotation the retrieval annotator writes on the human utterance
(``annotations["retrieval"]``), the one contract between it and the skills that read it
(the knowledge skill, the LLM skill). Its engine is the embedded index by default, or any
other :class:`Retriever` (a vector engine) chosen by configuration.

A passage's ``confidence`` is the probability that it answers the question: a logistic
function of what the search saw (the share of the question's words the passage holds, its
dense cosine, whether both halves of the search put it first, the share of the question's
words the knowledge base has at all), fitted by
``bench/knowledge.py --fit`` on the labelled question set over docs/ (right source and
section = 1; unanswerable questions and the wrong passages = 0); a passage that quotes the
question word for word (an example of what users say) has none. Being a probability, it
is comparable with the other skills' confidences, and a cut-off on it means what it says.
"""

from __future__ import annotations

import math
import re
from typing import Protocol

from pydantic import BaseModel, Field

from shared.knowledge.index import Hit

#: The logistic model's weights: intercept, overlap, cosine, both-first, known. Fitted by
#: ``python -m bench.knowledge --fit`` (docs/knowledge.md, "How answers are chosen").
WEIGHTS = (-8.5, 3.02, 2.79, 0.73, 6.05)

#: Words that make a short question lean on the previous one ("and how much is it?").
_FOLLOW_UP = re.compile(
    r"^(and|also|but|so|then|what about|how about|what if)\b|\b(it|its|it's|that|this|they|"
    r"them|those|these|there|one)\b",
    re.IGNORECASE,
)
#: A question with at most this many words is read with the one before it when it also
#: refers back (:data:`_FOLLOW_UP`).
FOLLOW_UP_WORDS = 8


class Retriever(Protocol):
    """What a retrieval engine offers: the best passages for a question, best first."""

    def search(self, query: str, k: int = 3, context: str | None = None) -> list[Hit]: ...


class RetrievedPassage(BaseModel):
    source: str = Field(description="the file, e.g. docs/backup.md")
    headings: list[str] = Field(description="its heading path, outermost first")
    section: str = Field(description="the deepest heading")
    link: str = Field(description="the file and the section's fragment")
    text: str
    score: float = Field(description="the fused reciprocal-rank score")
    confidence: float = Field(ge=0, le=1, description="the probability it answers the turn")


class Retrieved(BaseModel):
    """The annotation: the query searched (with its context, for a follow-up) and the
    passages found, best first."""

    query: str
    context: str | None = None
    passages: list[RetrievedPassage] = Field(default_factory=list)


def confidence(hit: Hit) -> float:
    """The probability ``hit`` answers its question (:data:`WEIGHTS`)."""
    both_first = 1.0 if hit.lexical_rank == 0 and hit.dense_rank == 0 else 0.0
    intercept, overlap, cosine, first, known = WEIGHTS
    z = (
        intercept
        + overlap * hit.overlap
        + cosine * hit.cosine
        + first * both_first
        + known * hit.known
    )
    return 1.0 / (1.0 + math.exp(-z))


def quotes(text: str, question: str) -> bool:
    """Whether ``text`` quotes ``question`` word for word ("ask `"What is 17 times
    23?"`"): documentation quotes what users say as examples, and a passage that shows the
    question as an example does not answer it."""
    asked = " ".join(question.lower().split()).rstrip("?!. ")
    if len(asked) < 3:
        return False
    pattern = rf"[\"“'`]\s*{re.escape(asked)}[?!.]?\s*[\"”'`]"
    return re.search(pattern, " ".join(text.lower().split())) is not None


def follow_up_context(question: str, previous: str | None) -> str | None:
    """The previous question when ``question`` is a short one that refers back to it."""
    if not previous or len(question.split()) > FOLLOW_UP_WORDS:
        return None
    return previous if _FOLLOW_UP.search(question) else None


def retrieve(
    engine: Retriever, question: str, previous: str | None = None, k: int = 3
) -> Retrieved:
    """Search ``question`` (with ``previous`` when it is a follow-up) and say how sure."""
    context = follow_up_context(question, previous)
    hits = engine.search(question, k=k, context=context)
    passages = [
        RetrievedPassage(
            source=hit.passage.source,
            headings=hit.passage.headings,
            section=hit.passage.section,
            link=hit.passage.link,
            text=hit.passage.text,
            score=round(hit.score, 6),
            confidence=0.0 if quotes(hit.passage.text, question) else round(confidence(hit), 4),
        )
        for hit in hits
    ]
    return Retrieved(query=question, context=context, passages=passages)
