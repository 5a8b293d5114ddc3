"""Answers questions about Chorus itself from ``faq.json``, by TF-IDF retrieval.

The user's utterance is compared with every FAQ question, in wording (cosine similarity of
character n-gram TF-IDF vectors, robust to plurals and typos: "annotators" finds
"annotator") and in meaning (:mod:`shared.meaning`: "Can you help me plan a weekend?"
shares the characters of "How can you help me?", not its meaning). The question closest in
wording gives its answer when it is close in both; the geometric mean of the two is the
raw confidence (capped at 0.95), calibrated (:mod:`shared.calibration`) into the chance
that it fits. Below :data:`THRESHOLD` the skill stays silent: a weak match is a wrong
answer, and other skills do small talk better.

The file is validated and the vectorizer fitted once, at import: a turn only transforms one
short text and takes one dot product per question.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent.sdk import DialogView, Service, SkillHypothesis
from shared import meaning, reading, spelling
from shared.asking import asks
from shared.calibration import calibrated
from shared.tfidf import ENGLISH_STOP_WORDS, Tfidf

FAQ_FILE = Path(__file__).parent / "faq.json"

#: The least similarity in wording (the cosine of character n-grams) for an entry to be
#: weighed at all: off-topic lines that share only "what is" or "where are" with a
#: question reach 0.47-0.56 ("where is paris", "what is love"), and the meaning sends them
#: away (:data:`MEANING_FLOOR`). A paraphrase in other words can fall below 0.5 in
#: wording while near in meaning ("does it have to be python?" from "Can I write a skill
#: in a language other than Python?"); from 0.45 the meaning decides, and the geometric
#: mean (:data:`THRESHOLD`) still asks the two together for as much as before.
SIMILARITY_FLOOR = 0.45
#: The least geometric mean of the wording's similarity and the meaning's that answers:
#: the least the former floors allowed (0.6 in wording, 0.5 in meaning), so the raw
#: confidences stay in the range the calibration was fitted on. The wording alone was held
#: to 0.6 before; but a cosine of character n-grams depends on the file, each entry
#: weighing every n-gram anew (its IDF): with twenty-two entries more, paraphrases that
#: had found theirs at 0.60-0.66 fell to 0.46-0.48 ("Just installed Chorus. How do I start
#: it?" from "How do I run Chorus?"), their meaning unchanged. From 0.5 in wording, a
#: paraphrase near in meaning answers again ("which port is chorus on?": 0.50, 0.85).
THRESHOLD = 0.55
#: Lowest similarity in meaning (:mod:`shared.meaning`) between the utterance and the
#: closest question that still answers: the characters of "Can you help me plan a weekend
#: in Edinburgh?" are close to "How can you help me?" (0.89), its meaning is not (0.37);
#: paraphrases score 0.6 and up ("where is my data stored?" ~ "Where are my dialogs
#: stored?" 0.60, "how can I add a skill" ~ "How do I add a new skill?" 0.85).
MEANING_FLOOR = 0.5
#: How many texts' closest entries :meth:`FaqIndex.best` keeps.
BEST_KEPT = 1024
#: Highest confidence the skill claims, even for an exact match.
MAX_CONFIDENCE = 0.95

_NOT_WORD = re.compile(r"[^\w\s]+")
#: The bot's name said to it, not asked about: after a comma or a greeting or closing word
#: ("Hi Chorus, how's life?", "how old are you, chorus?", "evening chorus, you good?"), or
#: opening the turn before a comma ("Chorus, what can you do?"). Its
#: characters are those of "What is Chorus?", and such a turn asks about something else.
BOT_NAME = "chorus"
_VOCATIVE = re.compile(
    r"(?P<before>,\s*|\b(?:hi|hey|hello|hiya|yo|morning|evening|night|goodnight|bye|thanks"
    rf"|cheers|ok|okay)\s+){BOT_NAME}\b|^\W*{BOT_NAME}\s*[,!:]\s*",
    re.IGNORECASE,
)
#: scikit-learn's English stop words, typed (scikit-learn ships no types).
_STOP_WORDS: frozenset[str] = ENGLISH_STOP_WORDS
#: Words of emphasis that change nothing of what is asked ("What exactly can you do?",
#: "so what can you actually do for me?"): a question made of stop words still answers
#: a turn whose only other words are these.
_EMPHASIS = frozenset({"actually", "exactly", "really", "even", "just", "anyway", "tho", "though"})
_APOSTROPHES = ("'", "\u2019")


class FaqEntry(BaseModel):
    """One entry of ``faq.json``."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    #: the intents annotator's intent this entry answers ("abilities"): a turn the
    #: annotator is sure of it gets this entry, however the user words it
    intent: str | None = None


class FaqHypothesis(SkillHypothesis):
    """A skill hypothesis that also says which FAQ question it answers."""

    faq_question: str


def load_faq(path: Path) -> list[FaqEntry]:
    """Read and validate the FAQ file; a broken file stops the service at start-up."""
    entries = TypeAdapter(list[FaqEntry]).validate_json(path.read_bytes())
    if not entries:
        raise ValueError(f"{path}: the FAQ holds no entry")
    return entries


def normalise(text: str) -> str:
    """Lowercase, no punctuation: "What's Chorus?" and "whats chorus" look the same."""
    return _NOT_WORD.sub(lambda m: "" if m.group() in _APOSTROPHES else " ", text.lower())


class FaqIndex:
    """The FAQ questions as TF-IDF vectors, fitted once (:mod:`shared.tfidf`, as
    scikit-learn's ``TfidfVectorizer`` fits them).

    A query is weighted here rather than with ``vectorizer.transform``: the same n-grams,
    sublinear term frequency, IDF and L2 norm, without scikit-learn's per-call validation
    and sparse-matrix overhead, which cost many times the weighting itself
    (docs/performance.md, "Figures behind the code's choices"). The test checks that both
    give the same similarities.
    """

    def __init__(self, entries: list[FaqEntry]) -> None:
        self.entries = entries
        tfidf = Tfidf(
            [e.question for e in entries],
            analyzer="char_wb",
            ngram_range=(3, 5),
            preprocessor=normalise,
        )
        self._questions = tfidf.dense()  # rows are L2-normalised
        self._analyse = tfidf.analyse
        self._vocabulary: dict[str, int] = tfidf.vocabulary
        self._idf = tfidf.idf
        #: the questions' meanings, embedded at the first question asked
        self._meanings: np.ndarray | None = None
        self._kept = functools.lru_cache(maxsize=BEST_KEPT)(self._closest)
        self._words = frozenset(
            word for e in entries for word in normalise(f"{e.question} {e.answer}").split()
        )

    def knows(self, word: str) -> bool:
        """Whether the FAQ writes ``word``, which careless typing's correction then keeps
        as typed (:func:`shared.spelling.normalise`): the English dictionary has no
        "helpdesk" nor "dialogs", and read them as "helpless" and "dialog"."""
        return word.lower() in self._words

    def similarities(self, text: str) -> np.ndarray:
        """Cosine similarity of ``text`` to every question (0..1)."""
        counts = Counter(g for g in self._analyse(text) if g in self._vocabulary)
        if not counts:
            return np.zeros(len(self.entries))
        columns = np.fromiter((self._vocabulary[g] for g in counts), dtype=np.intp)
        weights = (1.0 + np.log(np.fromiter(counts.values(), dtype=float))) * self._idf[columns]
        similarities: np.ndarray = self._questions[:, columns] @ weights
        similarities /= np.linalg.norm(weights)
        return similarities

    def best(self, text: str) -> tuple[FaqEntry, float, float] | None:
        """The closest entry to ``text`` in wording, its similarity and its meaning's
        (None under :data:`SIMILARITY_FLOOR`): the wording chooses, since the meaning's
        embedding takes "does the bot stream its answers?" for "Does the bot say where its
        answers come from?" (0.76, against 0.51 for "Does Chorus stream the answer as it is
        written?"). Kept by ``text`` for the last :data:`BEST_KEPT` texts (the weighing of
        its character n-grams was most of the skill's CPU, and the index never changes
        while the service runs)."""
        return self._kept(text)

    def best_of(self, text: str, intent: str) -> tuple[FaqEntry, float] | None:
        """Among the entries that answer ``intent``, the closest to ``text`` and its cosine
        similarity; None when no entry answers it."""
        named = [i for i, entry in enumerate(self.entries) if entry.intent == intent]
        if not named:
            return None
        similarities = self.similarities(text)
        index = max(named, key=lambda i: float(similarities[i]))
        return self.entries[index], float(similarities[index])

    def _closest(self, text: str) -> tuple[FaqEntry, float, float] | None:
        """:meth:`best`, searched."""
        similarities = self.similarities(text)
        index = int(similarities.argmax())
        similarity = float(similarities[index])
        if similarity < SIMILARITY_FLOOR:
            return None
        if self._meanings is None:
            self._meanings = meaning.embed([e.question for e in self.entries])
        close = max(0.0, float(meaning.similarities(text, self._meanings)[index]))
        return self.entries[index], similarity, close


INDEX = FaqIndex(load_faq(FAQ_FILE))
#: Readings of careless typing kept, by utterance (:func:`read_as_typed`): chat repeats
#: itself ("hi", "thanks", "ok"), and the intents annotator and small talk keep theirs.
READINGS_KEPT = 1024


@functools.lru_cache(maxsize=READINGS_KEPT)
def read_as_typed(text: str) -> str:
    """``text`` with careless typing read the careful way, the words the FAQ writes kept
    as typed (:meth:`FaqIndex.knows`: "helpdesk" is not "helpless"). :mod:`shared.spelling`
    keeps no reading made with a keep-list, which may change (an index reloaded); the
    FAQ's is read once, at import, so its readings are kept here: every turn is read by
    the FAQ, the intents annotator and small talk, and a repeated one was read again."""
    return spelling.normalise(text, INDEX.knows)


def content_words(text: str) -> set[str]:
    """The words of ``text`` that are not English stop words ("what", "can", "you", "do")."""
    return set(normalise(text).split()) - _STOP_WORDS - _EMPHASIS


def unaddressed(text: str) -> str:
    """``text`` without the bot's name where it is said to the bot (:data:`_VOCATIVE`):
    "Hi Chorus, how's life?" asks how the bot is, not what Chorus is."""
    return _VOCATIVE.sub(lambda found: found.group("before") or "", text)


def answer_by_intent(text: str, annotations: Mapping[str, Any] | None) -> FaqHypothesis | None:
    """The answer of an entry that names the intent the intents annotator is sure of
    (``intent`` in faq.json: "What can you do?" answers ``abilities``), the nearest of
    them in wording when several do. The annotator read the turn's kind already, so a
    word of the user's own around it ("cool. what else can you do", "what exactly are you
    capable of?") and the embedding's doubt do not make it another question; the raw
    confidence is the wording's similarity, calibrated apart (kind
    ``retrieval_by_intent``)."""
    intent = reading.sure_intent(annotations)
    if intent is None:
        return None
    found = INDEX.best_of(text, intent)
    if found is None:
        return None
    entry, similarity = found
    hypothesis = FaqHypothesis(
        text=entry.answer,
        confidence=round(min(MAX_CONFIDENCE, similarity), 4),
        faq_question=entry.question,
    )
    return calibrated(hypothesis, "faq", "retrieval_by_intent", annotations)


def answer(text: str, annotations: Mapping[str, Any] | None = None) -> FaqHypothesis | None:
    """The FAQ answer to ``text``, or None when no question is close enough.

    A line that asks nothing gets no answer (:func:`asks`). A question made only of stop
    words ("What can you do?") shares its character n-grams
    with half of everyday talk ("Can you recommend a good book?" scores 0.76 against it), so
    it answers only utterances that are stop words too ("what can you do for me").
    """
    text = unaddressed(text)
    by_intent = answer_by_intent(text, annotations) if text.strip() else None
    if by_intent is not None:
        return by_intent  # "help", "cool. what else can you do": the annotator read it
    if not text.strip() or not asks(text):
        return None
    found = INDEX.best(text)
    if found is None:
        return None
    entry, similarity, close = found
    both = math.sqrt(similarity * close)  # the wording and the meaning: their geometric mean
    if both < THRESHOLD or close < MEANING_FLOOR:
        return None
    if not content_words(entry.question) and content_words(text):
        return None
    hypothesis = FaqHypothesis(
        text=entry.answer,
        confidence=round(min(MAX_CONFIDENCE, both), 4),
        faq_question=entry.question,
    )
    # the confidence as the chance that such an answer fits (shared/calibration.py)
    # and weighed by the turn's reading when the annotations carry one (shared/reading.py)
    return calibrated(hypothesis, "faq", "retrieval", annotations)


service = Service(
    "faq", description="Answers questions about Chorus from faq.json.", never_changes_view=True
)


@service.skill
async def faq(dialog: DialogView) -> list[SkillHypothesis]:
    human = dialog.human_utterance
    hypothesis = answer(read_as_typed(human.text), human.annotations)
    return [hypothesis] if hypothesis else []


app = service.app
# the spelling dictionary loaded at start-up, not on the first turn (shared/spelling.py)
spelling.warm()
