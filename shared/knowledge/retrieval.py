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
from collections.abc import Callable, Sequence
from typing import Protocol

from pydantic import BaseModel, Field

from shared import spelling
from shared.asking import asks_something, without_greeting
from shared.knowledge.index import Hit

#: Every sign of a hit the confidence can weigh (:func:`signs`); :data:`FEATURES` are
#: those it does.
SIGNS: tuple[str, ...] = (
    "overlap",
    "cosine",
    "both_first",
    "known",
    "file_voted",
    "dense_file",
    "margin",
    "text_overlap",
)
#: The signs :data:`WEIGHTS` weigh, in order. The last three say whether the passage's
#: *file* is the one the search points at (its file won the file bonus's vote, its lead
#: over the best passage of another file, the share of the question's words in its own
#: text rather than its file name and headings): without them, questions written by
#: someone else got confident answers from a neighbouring page. Of the subsets of the
#: file signs (the dense half's best file too) at C 0.3, 1 and 3, these three at C = 1
#: gave the most right files among the answers of the fitting two thirds (0.960 against
#: 0.901), declining as many unanswerable questions and answering more from a right file
#: (docs/performance.md, "Knowledge base").
FEATURES: tuple[str, ...] = (
    "overlap",
    "cosine",
    "both_first",
    "known",
    "file_voted",
    "margin",
    "text_overlap",
)
#: The logistic model's weights: the intercept, then one per :data:`FEATURES`. Fitted by
#: ``python -m bench.knowledge --fit`` on two thirds of the question set (the held-out
#: third's figures are out of sample; docs/knowledge.md, "How answers are chosen").
WEIGHTS = (-4.68, 1.02, 1.4, 0.78, 2.47, 0.61, 1.56, 1.02)

#: The passages a turn's retrieval returns (``KNOWLEDGE_TOP_K``). The knowledge skill quotes
#: only the first; the LLM is given them all when the first is over its floor
#: (``LLM_KNOWLEDGE_MIN_CONFIDENCE``) and cites them. Six: the first three are the search's
#: three best, and the later ones more often hold a passage of the file a stranger's
#: question is about; from five to six no question set lost one and three gained, for one
#: passage more in the LLM's prompt, while seven and eight gained no further file on the
#: sets the choice was made on (with the floor judging the turn by its best passage, eight
#: gained one, for two passages more; bench/journal/knowledge.md).
TOP_K = 6

#: A question that opens with a joining word continues the one before it ("and only the
#: ones after January?", "but on SQLite?").
_JOINED = re.compile(r"^(and|also|but|so|then|or|plus|what about|how about|what if)\b", re.I)
#: Words that point back at something named before ("can it export over gRPC?"). Not
#: "there" in "is there ...?", which says that something exists ("is there a Helm
#: chart?"), "one of ...", which counts ("when one of the skills crashes"), nor "this"
#: naming the bot or the software the user is talking to ("does this bot keep what I
#: say?"): those questions are about the docs' subject on their own, and read with an
#: unrelated question before them they were searched with its words.
_POINTS_BACK = re.compile(
    r"\b(?:it|its|it's|itself|that|they|them|their|theirs|those|these|ones|he|she|him|her)\b"
    r"|(?<!\bis )(?<!\bare )(?<!\bwas )(?<!\bwere )\bthere\b"
    r"|\bone\b(?!\s+of\b)"
    r"|\bthis\b(?!\s+(?:bot|chatbot|assistant|agent|service|project|software|app|thing|chat"
    r"|conversation)\b)",
    re.IGNORECASE,
)
#: A question that opens with a joining word is read with the one before it up to this
#: many words; one that only points back, up to :data:`FOLLOW_UP_WORDS`.
JOINED_WORDS = 16
#: A question with at most this many words is read with the one before it when it
#: points back (:data:`_POINTS_BACK`).
FOLLOW_UP_WORDS = 10


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
    cosine: float | None = Field(
        default=None,
        description="its meaning's cosine with the question's own words (without a "
        "follow-up's context), -1..1; None from an annotator that predates it",
    )


class Retrieved(BaseModel):
    """The annotation: the query searched (with its context, for a follow-up) and the
    passages found, best first."""

    query: str
    context: str | None = None
    passages: list[RetrievedPassage] = Field(default_factory=list)


def signs(hit: Hit, names: tuple[str, ...] = FEATURES) -> list[float]:
    """The values of ``names`` (of :data:`SIGNS`) for ``hit``, in that order."""
    every = {
        "overlap": hit.overlap,
        "cosine": hit.cosine,
        "both_first": 1.0 if hit.lexical_rank == 0 and hit.dense_rank == 0 else 0.0,
        "known": hit.known,
        "file_voted": float(hit.file_voted),
        "dense_file": float(hit.dense_file),
        "margin": hit.margin,
        "text_overlap": hit.text_overlap,
    }
    return [every[name] for name in names]


def confidence(
    hit: Hit, weights: tuple[float, ...] = WEIGHTS, names: tuple[str, ...] = FEATURES
) -> float:
    """The probability ``hit`` answers its question (:data:`WEIGHTS` over :data:`FEATURES`,
    or the benchmark's candidates)."""
    return probability(signs(hit, names), weights)


def probability(values: Sequence[float], weights: tuple[float, ...] = WEIGHTS) -> float:
    """The logistic of ``weights`` (the intercept, then one per sign) over a hit's signs'
    ``values`` (:func:`signs`): what :func:`confidence` gives, for signs already read."""
    z = weights[0] + sum(w * x for w, x in zip(weights[1:], values, strict=True))
    return 1.0 / (1.0 + math.exp(-z))


#: The marks a quoted question opens and closes with, and those it may end with.
_OPENING = frozenset("\"“'`")
_CLOSING = frozenset("\"”'`")
_ENDS = frozenset("?!.")


def quotes(text: str, question: str) -> bool:
    """Whether ``text`` quotes ``question`` word for word ("ask `"What is 17 times
    23?"`"): documentation quotes what users say as examples, and a passage that shows the
    question as an example does not answer it. A scan for the question, not a pattern
    made of it: a pattern would be compiled anew for every question a user asks."""
    asked = " ".join(question.lower().split()).rstrip("?!. ")
    if len(asked) < 3:
        return False
    flat = " ".join(text.lower().split())
    start = flat.find(asked)
    while start != -1:
        before = start - 1 if start and flat[start - 1] == " " else start
        after = start + len(asked)
        after += flat[after : after + 1] in _ENDS
        after += flat[after : after + 1] == " "
        if before and flat[before - 1] in _OPENING and flat[after : after + 1] in _CLOSING:
            return True
        start = flat.find(asked, start + 1)
    return False


def read_as_asked(text: str, knows: Callable[[str], bool] | None = None) -> str:
    """``text`` as it is searched, by the retrieval annotator and read by the knowledge
    skill alike: without the greeting that opens it ("hi, is there a REST API for the
    bot?", :func:`shared.asking.without_greeting`), careless typing read the careful way
    (:func:`shared.spelling.normalise`, keeping the words ``knows``)."""
    return spelling.normalise(without_greeting(text), knows)


def follow_up_context(question: str, previous: str | None) -> str | None:
    """The previous question when ``question`` continues it: it opens with a joining word
    ("and ...", "what about ...") and has at most :data:`JOINED_WORDS` words, or it points
    back ("it", "them", "those") and has at most :data:`FOLLOW_UP_WORDS`. A previous turn
    that asked nothing is no question to continue (:func:`shared.asking.asks_something`):
    after "Hello. I'm evaluating Chorus for our team" or a name, "does it expose
    Prometheus metrics?" speaks of the bot, and the greeting's words only blur its search."""
    if not previous:
        return None
    words = len(question.split())
    joined = _JOINED.search(question.strip()) is not None and words <= JOINED_WORDS
    points_back = _POINTS_BACK.search(question) is not None and words <= FOLLOW_UP_WORDS
    # the previous turn read (the speller's work) only for a question that would continue
    # it: most turns do not, and this runs on every turn, twice on a search not kept
    return previous if (joined or points_back) and asks_something(previous) else None


def retrieve(
    engine: Retriever, question: str, previous: str | None = None, k: int = TOP_K
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
            cosine=round(hit.cosine, 4),
        )
        for hit in hits
    ]
    return Retrieved(query=question, context=context, passages=passages)
