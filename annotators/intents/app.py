"""Intent catcher: which of a few conversational intents the newest utterance expresses.

Output (under ``annotations["intents"]``)::

    {"intent": "greeting", "confidence": 1.0, "method": "pattern"}
    {"intent": "abilities", "confidence": 0.5844, "method": "similarity"}
    {"intent": null, "confidence": 0.4565, "method": null,
     "nearest": "farewell", "likeness": 0.4565}

The intents live in ``intents.json`` (see README.md), each with regex ``patterns`` and
natural ``examples``. Patterns are precise, so a hit wins outright (confidence 1.0); when
several intents' patterns hit, the longest matched span wins, so "hi, how are you?" is
``how_are_you`` and "of course not" is ``no``. A hit that leaves a question of its own
unexplained ("Hi, what's a good name for a bakery?") scores :data:`PARTIAL_CONFIDENCE`,
under the floor of the selector and the skills, which then leave the turn to the skills that
read all of it. Whatever the reading, ``nearest`` and ``likeness`` say which intent's example
the utterance is most like and how much (the similarity below), even under the threshold:
"later!" is not a sure farewell, but it is most like one, and a skill may answer such a
reading with an answer type of its own, as sure as its calibration found such readings to be
(``shared/calibration.py``). Letters typed three times ("hiii") count once. Patterns cannot
foresee every phrasing, so the fallback compares the utterance with the examples twice: by
TF-IDF cosine similarity (word uni/bigrams for wording, character n-grams for typos and
inflections) and by meaning (:mod:`shared.meaning`, a sentence embedding), and takes the
best example's intent if both agree it is close (their geometric mean). Wording alone
misfired: "Have you ever been to Japan?" and "How old are you?" read as ``how_are_you``,
"Do you have any pets?" as ``abilities``; their meaning is far from every example. The file
is validated and the vectorizers fitted once, at import: a bad data file stops the service
at start-up, naming the intent and field.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    ValidationError,
    field_validator,
)

from agent.sdk import DialogView, Service
from annotators.intents import languages
from shared import meaning, reading, spelling
from shared.asking import GREETING, SUBJECT_WORDS, subject_words
from shared.questions import asks_as_typed
from shared.tfidf import Tfidf

INTENTS_FILE = Path(__file__).parent / "intents.json"

#: Below this similarity to the nearest example (wording and meaning combined), the
#: utterance has no intent. Chosen on paraphrases and unrelated chat lines none of them in
#: the file (test_app.py lists them).
SIMILARITY_THRESHOLD = 0.5
#: And the nearest example must mean nearly the same on its own: "How old are you?" shares
#: all but one word with "how are you?" (wording 0.87, combined 0.67) but its meaning is
#: 0.52 from it; true paraphrases score 0.57 ("who built you" ~ "who made you") and up.
MEANING_FLOOR = 0.55
#: The confidence of a pattern that explains only part of the utterance: the rest asks a
#: question of its own ("Hi, what's a good name for a bakery?", "How do I say goodbye in
#: French?"). Under the skill selector's and the skills' floor (0.7), so no script takes
#: the turn for a greeting or a goodbye; the skills that read the whole text still may.
PARTIAL_CONFIDENCE = 0.6
#: Words the rest must have to be a question of its own.
PARTIAL_WORDS = 3
#: The intents that open, close or answer a turn and can come with a question of their own
#: ("Hi, ...", "Thanks! ...", "Yes, but ..."); the others are that question ("what's my
#: name, do you remember?" is ask_name through and through).
SOCIAL_INTENTS = frozenset({"greeting", "farewell", "thanks", "yes", "no"})
#: The rest asks a question without its question mark, as careless typing drops it ("hi,
#: whats a good name for a bakery"): a clause of it (the rest's start, or after a stop, a
#: comma or a dash: "hi chorus quick q - do you ship a helm chart") opens with a question
#: word ("thanks, what a day" exclaims), with a modal before its subject ("can chorus run
#: it"), with "do" before the bot and a verb of its own ("do you ship a helm chart": what
#: the product does), or with an auxiliary whose subject is not the bot ("hi, is Lisbon or
#: Porto better for a first trip"; "is anybody there", "are you a bot" ask what a greeting
#: usually comes with, read below).
_ASKS_AFTER = re.compile(
    r"(?:^|[,;:.!?]|\s[-\u2013\u2014]+\s)\W*"
    r"(?:(?:what|what's|whats|who|who's|why|how|when|where|which)\b(?!\s+an?\b)"
    r"|(?:can|could|would|will|should)\s+(?:you|u|i|we|chorus|it|this|that|they)\b"
    # a bid opening a clause: "yo recommend me a show", "hey, tell me a fun fact"
    r"|(?:recommend|suggest|tell|give|show|find|help|explain|write|make|teach|translate|list)"
    r"\s+(?:me|us|a|an|some|the|my)\b"
    r"|(?:does|do|did)\s+(?:you|u|chorus|it)\s+(?!remember\b)\w+"
    r"|(?:is|are|was|were|does|do|did|should)\s+"
    r"(?!you\b|u\b|ya\b|ye\b|yourself\b|any(?:one|body)\b|some(?:one|body)\b)\w+\s+\w+)",
    re.IGNORECASE,
)
#: What a greeting's rest may ask and still be the greeting's company, not a question of
#: its own: whether anyone is there ("Hello, is anybody there?" is most like a greeting),
#: how the bot is, who it is ("hi, is this the help bot?").
GREETINGS_COMPANY = frozenset({"greeting", "how_are_you", "bot_identity"})
#: ... read by likeness from here (the nearest examples of "is this the help bot?" and
#: "is anyone there" are 0.44 and 0.58 alike; of "what's a good name for a bakery?" 0.2).
COMPANY_LIKENESS = 0.35
#: A request in the rest, wherever it stands: "can you recommend a podcast...", "i need a
#: caption for my beach pic", "i need some advice: ...", a want of something to do
#: ("I'd like to add our company FAQ to the bot", "i want to know ..."), and another's need
#: of help told for them.
_REQUESTS_AFTER = re.compile(
    r"\b(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+)?(?:help|recommend|suggest|tell|give"
    r"|write|make|explain|find|show|translate|plan|check|teach)\b"
    r"|\bi(?:'?d\s+like|\s+(?:need|want|would\s+like|wanna))\s+(?:a|an|some|help|advice|ideas?|tips?"
    r"|to\s+(?!say\b|chat\b|talk\b)\w+)\b"
    # someone's need of help: "hi my son needs help with fractions"
    r"|\b(?:needs|wants)\s+(?:help|advice|ideas?|tips?)\b",
    re.IGNORECASE,
)
#: Intents whose pattern is a small part of a turn that may ask a question of its own
#: beside it, though not one about the bot.
PARTLY_ASKED = frozenset({"how_are_you"})
#: ... and intents that ask for help, whose rest may name a task of its own (three words
#: or more, greetings aside: "me write a cover letter", "with my homework").
TASKED = frozenset({"abilities"})
_BOT = re.compile(r"\b(?:you|your|yours|yourself|u|ur|chorus)\b", re.IGNORECASE)


#: The bot addressed: "you", "your", as chat types them too.
_YOU = re.compile(r"\b(?:you|your|yours|u|ur|ya)\b", re.IGNORECASE)


def tells_how_they_are(text: str, intent: str) -> bool:
    """A statement of the user's own state that is only like asking how the bot is: "I
    feel down today" is 0.67 like "how do you feel today?" and was read as ``how_are_you``
    (small talk answered "I'm doing great, thanks for asking! How are you?"). It asks
    nothing (:func:`shared.questions.asks_as_typed`) and does not address the bot, so it is
    no such question; its likeness stays as the nearest intent."""
    return intent == "how_are_you" and not asks_as_typed(text) and not _YOU.search(text)


def asks_of_its_own(rest: str) -> bool:
    """The rest of a turn beside an intent's pattern asks something of its own: a question
    (with or without its mark) or a request."""
    return "?" in rest or bool(_ASKS_AFTER.search(rest) or _REQUESTS_AFTER.search(rest))


#: Letters typed three times or more ("hiii", "heyyy"): read as one.
_ELONGATED = re.compile(r"(\w)\1{2,}")
_WORDS = re.compile(r"\w+")
#: Annotations kept, by utterance and the bot's line before it: chat repeats itself ("hi",
#: "thanks", "ok"), and a repeated turn is read again for nothing (docs/performance.md,
#: "Half the CPU").
KEPT = 1024
#: How much word n-grams (wording) and character n-grams (spelling) weigh in the similarity.
WORD_WEIGHT = 0.5
CHAR_WEIGHT = 1.0 - WORD_WEIGHT

IntentName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
Example = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class IntentSpec(BaseModel):
    """One intent of the data file."""

    model_config = ConfigDict(extra="forbid")

    patterns: list[str] = Field(default_factory=list)
    examples: list[Example] = Field(min_length=1)

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"pattern {pattern!r} is not a valid regex: {error}") from error
        return patterns


class IntentsFile(RootModel[dict[IntentName, IntentSpec]]):
    """The whole ``intents.json``: intent name -> its patterns and examples."""

    root: dict[IntentName, IntentSpec] = Field(min_length=1)


class Intent(BaseModel):
    intent: str | None
    confidence: float = Field(ge=0.0, le=1.0)
    method: Literal["pattern", "similarity", "opening"] | None
    #: the intent of the example most like the utterance, and how alike (0..1), whether or
    #: not that is sure enough to be ``intent``; none when a pattern decided or nothing is alike
    nearest: str | None = None
    likeness: float = Field(default=0.0, ge=0.0, le=1.0)
    #: the other intents whose patterns also hit ("hi, how are you?" is how_are_you, and a
    #: greeting too): a skill of one of them may still answer, as the labels say it fits
    also: list[str] = Field(default_factory=list, exclude_if=lambda found: not found)
    #: the turn's reading (shared/reading.py): each label's probability of fitting the
    #: turn, for the skills' confidences; absent without a reading file or an utterance
    reading: dict[str, float] | None = Field(default=None, exclude_if=lambda r: r is None)


#: The most bytes a fit's rows are kept dense in (:class:`FittedTfidf`).
DENSE_MOST = 2_000_000


class FittedTfidf:
    """TF-IDF fitted on the examples (:mod:`shared.tfidf`, as scikit-learn's
    ``TfidfVectorizer`` with ``sublinear_tf``): the cosine of a text with each example, as
    ``vectorizer.transform([text]) @ examples.T`` computes it.

    Done by hand because the utterance is one short string and scikit-learn's
    ``transform`` spends milliseconds a call on checks and sparse-matrix set-up (most of
    the annotator's time, and the annotator is on every turn's path to the skills): the
    analyser (lowercasing, n-grams), the vocabulary and idf weights, ``1 + log(count)``
    and the L2 norm give the same vector.

    Rows that would take more than :data:`DENSE_MOST` dense are kept as compressed
    columns (each feature's examples and values): the other languages' greetings have
    4,770 character n-grams over 298 statements, 99 % of them zeros, and dense in float64
    they were 14 MB of the served agent (docs/performance.md, "The served agent's
    memory"). A call lays out the text's own features' rows densely, the same figures in
    the same places, and multiplies them as before, so the cosines are the same numbers.
    Smaller fits (the English examples', 1.3 MB) stay dense: laying the rows out cost their
    cosines 10-75 us more a text.
    """

    def __init__(self, tfidf: Tfidf) -> None:
        self._analyze = tfidf.analyse
        self._vocabulary: dict[str, int] = tfidf.vocabulary
        self._idf: np.ndarray = tfidf.idf
        self._examples: int = tfidf.shape[0]
        self._dense: np.ndarray | None = None
        if tfidf.shape[0] * tfidf.shape[1] * 8 <= DENSE_MOST:
            #: feature x example
            self._dense = np.ascontiguousarray(tfidf.dense().T)
            return
        #: feature ``f``'s examples ``indices[indptr[f]:indptr[f + 1]]``, values in ``data``
        self._indptr, self._indices, self._data = tfidf.by_column()

    def _rows(self, features: np.ndarray) -> np.ndarray:
        """The dense feature x example rows of ``features`` (distinct feature numbers)."""
        if self._dense is not None:
            kept: np.ndarray = self._dense[features]
            return kept
        starts = self._indptr[features]
        lengths = self._indptr[features + 1] - starts
        rows = np.zeros((len(features), self._examples))
        ends = np.cumsum(lengths)
        taken = np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]))
        rows[np.repeat(np.arange(len(features)), lengths), self._indices[taken]] = self._data[taken]
        return rows

    def cosines(self, text: str) -> np.ndarray:
        counts = Counter(
            self._vocabulary[feature]
            for feature in self._analyze(text)
            if feature in self._vocabulary
        )
        if not counts:
            return np.zeros(self._examples)
        features = np.fromiter(counts.keys(), dtype=np.intp, count=len(counts))
        weights = (np.log(np.fromiter(counts.values(), dtype=np.float64)) + 1.0) * self._idf[
            features
        ]
        weights /= np.linalg.norm(weights)
        cosines: np.ndarray = weights @ self._rows(features)
        return cosines


class Wording:
    """How like each of some texts a text is in wording (word n-grams) and spelling
    (character n-grams): their TF-IDF cosines, weighed by :data:`WORD_WEIGHT`. Both the
    English examples and the other languages' greetings are read this way."""

    def __init__(self, texts: list[str]) -> None:
        self._words = FittedTfidf(
            Tfidf(texts, analyzer="word", ngram_range=(1, 2), token_pattern=r"(?u)\b\w+\b")
        )
        self._chars = FittedTfidf(Tfidf(texts, analyzer="char_wb", ngram_range=(2, 4)))

    def similarities(self, text: str) -> np.ndarray:
        similarities: np.ndarray = WORD_WEIGHT * self._words.cosines(
            text
        ) + CHAR_WEIGHT * self._chars.cosines(text)
        return similarities


class IntentCatcher:
    """Patterns first, then similarity to the examples; fitted once, then read-only."""

    def __init__(self, intents: dict[str, IntentSpec]) -> None:
        self._patterns = [
            (name, re.compile(p, re.IGNORECASE))
            for name, spec in intents.items()
            for p in spec.patterns
        ]
        self._labels = [name for name, spec in intents.items() for _ in spec.examples]
        examples = [e for spec in intents.values() for e in spec.examples]
        self._wording = Wording(examples)
        self._meanings = meaning.embed(examples)

    def classify(self, text: str) -> Intent:
        text = text.replace("\u2019", "'")  # a typographic apostrophe: what\u2019s my name
        text = _ELONGATED.sub(r"\1", text)
        found = self.by_pattern(text)
        if found is not None:
            matched, span = found
            also = self.also_by_pattern(text, matched)
            rest = text[: span[0]] + " " + text[span[1] :]
            partial = len(_WORDS.findall(rest)) >= PARTIAL_WORDS and (
                (matched in SOCIAL_INTENTS and asks_of_its_own(rest))
                # "sup, should i get an iphone or a samsung": a question beside "how are
                # you" that is not about the bot ("what's your favourite film" is)
                or (matched in PARTLY_ASKED and asks_of_its_own(rest) and not _BOT.search(rest))
                # "can you help me write a cover letter": help with a task of its own
                or (matched in TASKED and len(_WORDS.findall(GREETING.sub(" ", rest))) >= 3)
            )
            company = self.greetings_company(rest) if partial and matched == "greeting" else None
            if company is not None:
                # "hiya chorus, how's your day been?", "Hello, is anybody there?": the rest
                # asks how the bot is, who it is or whether it is there, which is no
                # question of its own but a greeting's usual company
                if company == "greeting":
                    return Intent(intent="greeting", confidence=1.0, method="pattern", also=also)
                return Intent(intent=company, confidence=1.0, method="pattern", also=["greeting"])
            confidence = PARTIAL_CONFIDENCE if partial else 1.0
            return Intent(intent=matched, confidence=confidence, method="pattern", also=also)
        intent, similarity, close_in_meaning = self.most_similar(text)
        nearest = intent if similarity > 0.0 else None
        if (
            similarity >= SIMILARITY_THRESHOLD
            and close_in_meaning >= MEANING_FLOOR
            and not tells_how_they_are(text, intent)
        ):
            return Intent(
                intent=intent,
                confidence=similarity,
                method="similarity",
                nearest=nearest,
                likeness=similarity,
            )
        return Intent(
            intent=None, confidence=similarity, method=None, nearest=nearest, likeness=similarity
        )

    def greetings_company(self, rest: str) -> str | None:
        """The intent of what a greeting's ``rest`` asks, when it is a greeting's usual
        company: how the bot is, who it is, or whether anyone is there (its last clause,
        "chorus, how's your day been?", read surely or, from :data:`COMPANY_LIKENESS`, by
        likeness when it asks about no subject of its own: "do you think AI can be
        conscious?" is like "are you an AI" but asks about AI, :func:`shared.asking.
        subject_words`); else None: the rest is a question of its own."""
        clause = re.split(r"[,;:.!]", rest)[-1]
        asked = self.classify(clause)
        if asked.intent in GREETINGS_COMPANY:
            return asked.intent
        if subject_words(clause) >= SUBJECT_WORDS:
            return None  # "do you think AI can be conscious?": a subject's, not the bot's
        if asked.nearest in GREETINGS_COMPANY and asked.likeness >= COMPANY_LIKENESS:
            return asked.nearest
        return None

    def by_pattern(self, text: str) -> tuple[str, tuple[int, int]] | None:
        """The intent whose pattern matches the longest span (file order breaks ties), and
        the span."""
        best: tuple[int, str, tuple[int, int]] | None = None
        for name, pattern in self._patterns:
            match = pattern.search(text)
            if match and (best is None or len(match[0]) > best[0]):
                best = (len(match[0]), name, match.span())
        return (best[1], best[2]) if best else None

    def also_by_pattern(self, text: str, matched: str) -> list[str]:
        """The other intents whose patterns hit ``text`` besides ``matched``, in file order."""
        hits = (
            name for name, pattern in self._patterns if name != matched and pattern.search(text)
        )
        return list(dict.fromkeys(hits))

    def most_similar(self, text: str) -> tuple[str, float, float]:
        """The nearest example's intent, its similarity (the geometric mean of the weighted
        TF-IDF cosine and the meaning's cosine, so both must be high) and the meaning's
        cosine alone, rounded."""
        wording = np.clip(self._wording.similarities(text), 0.0, 1.0)
        meanings = np.clip(meaning.similarities(text, self._meanings), 0.0, 1.0)
        dense = np.sqrt(wording * meanings)
        best = int(dense.argmax())
        return (
            self._labels[best],
            round(min(1.0, float(dense[best])), 4),
            round(float(meanings[best]), 4),
        )


class OtherLanguages:
    """Greetings in other languages (:mod:`annotators.intents.languages`), less those
    ``catcher`` already reads (English ones), compared by :class:`Wording` alone (the
    embedding reads English only)."""

    def __init__(self, statements: list[str], catcher: IntentCatcher) -> None:
        self.statements = [s for s in statements if catcher.classify(s).intent is None]
        self._wording = Wording(self.statements)

    def greeting(self, text: str) -> Intent | None:
        """``text`` read as a greeting when it is like one of the statements from
        :data:`languages.FLOOR`; its likeness is the confidence."""
        if not self.statements:
            return None
        likeness = round(min(1.0, float(self._wording.similarities(text).max())), 4)
        if likeness < languages.FLOOR:
            return None
        return Intent(
            intent="greeting",
            confidence=likeness,
            method="similarity",
            nearest="greeting",
            likeness=likeness,
        )


class BadIntentsFile(ValueError):
    """The intents file is not JSON of the documented shape; the message names the place."""


def load(path: Path) -> IntentCatcher:
    """Read, validate and fit an intents file, or say what is wrong with it and where."""
    try:
        intents = IntentsFile.model_validate_json(path.read_bytes())
    except ValidationError as error:
        raise BadIntentsFile(f"{path}: {error}") from error
    return IntentCatcher(intents.root)


CATCHER = load(INTENTS_FILE)
OTHER_LANGUAGES = OtherLanguages(languages.corpus_greetings(), CATCHER)


#: How a user addresses the bot in an opener: "shalom robot", "heyo bot", "hola chorus".
_ADDRESS = re.compile(r"\b(?:little\s+)?(?:ro)?bot\b|\bchorus\b", re.IGNORECASE)
#: Intents that close a conversation: on its opening turn, one read only by likeness is no
#: reading (:func:`classify_turn`).
NOTHING_YET = frozenset({"thanks", "farewell"})
#: An opening turn of at most this many words that no intent reads is a greeting
#: (:func:`short_opening`): all 283 such openers of the four training sets are ("helo",
#: "konnichiwa!", "wsg", "Privet!", "Guten Tag!", "heyo bot").
OPENING_WORDS = 3
#: Its confidence: the skill selector's and the greeting's floor, so the greeting opens its
#: script; the greeting calls it an answer type of its own (``greet_opening``), calibrated
#: apart from a greeting a pattern read.
OPENING_CONFIDENCE = 0.7
#: An opening turn that asks or bids in English ("what is chorus", "tell me one", "can u
#: help") is not such a greeting, however short.
_ASKS_OR_BIDS = re.compile(
    r"^\W*(?:what|what's|whats|who|who's|why|how|when|where|which|whose|can|could|would|"
    r"should|will|do|does|did|is|are|am|was|were|tell|give|show|explain|help|define|say|"
    r"write|make|list|find|i|i'm|my|you|your)\b",
    re.IGNORECASE,
)

#: ... nor one that asks for something politely ("joke please").
_PLEASE = re.compile(r"\b(?:please|pls|plz)\b", re.IGNORECASE)


def short_opening(text: str, found: Intent) -> Intent | None:
    """An opening turn of a few words that no intent reads, and that neither asks nor bids
    in English, read as a greeting: people open a first conversation by greeting, in any
    language and spelling ("konnichiwa!", "helo", "wsg"), and the corpus's greetings files
    cannot hold them all. How sure that reading is, the calibration says (answer type
    ``greet_opening`` of the greeting skill)."""
    words = _WORDS.findall(text)
    if found.intent is not None or not 0 < len(words) <= OPENING_WORDS:
        return None
    if found.nearest not in (None, "greeting") and found.likeness >= languages.ENGLISH_NEAR:
        return None  # near another intent's examples ("later!" is most like a goodbye)
    if _ASKS_OR_BIDS.search(text) or _PLEASE.search(text):
        return None
    return Intent(
        intent="greeting",
        confidence=OPENING_CONFIDENCE,
        method="opening",
        nearest=found.nearest,
        likeness=found.likeness,
    )


def classify_turn(text: str, opening: bool) -> Intent:
    """The intent of ``text`` (spelling normalised); on the conversation's ``opening``
    turn, one no English intent reads, nor is near, may be a greeting in another language
    ("Hola", "oi, tudo bom?": :class:`OtherLanguages`). "later!" is near the English
    goodbyes, and some of the corpus's greetings files hold a goodbye too ("Tot later!").
    A short opening turn nothing reads is a greeting all the same (:func:`short_opening`)."""
    found = CATCHER.classify(text)
    if opening and found.method != "pattern":
        # the bot addressed as "bot" or "robot" says nothing of what the opener is: "shalom
        # robot", "heyo bot" are near "are you a robot" in words only
        bare = _ADDRESS.sub(" ", text).strip()
        if bare and bare != text.strip():
            alone = classify_turn(bare, opening=True)
            if alone.intent == "greeting":
                return alone
    if opening and found.intent is None and found.likeness < languages.ENGLISH_NEAR:
        found = OTHER_LANGUAGES.greeting(text) or found
    if opening and found.method == "similarity" and found.intent in NOTHING_YET:
        # nothing to thank for or leave yet: "oi mate", "g'day mate" are like "thanks
        # mate" in words, and greet (both such openers of the sixteen training sets do)
        found = Intent(intent=None, confidence=found.confidence, method=None)
    if opening:
        return asks_how_first(short_opening(text, found) or found)
    return unsaid_greeting(text, found) or found


def unsaid_greeting(text: str, found: Intent) -> Intent | None:
    """``found`` as no intent, its likeness kept, when it is a greeting read only by
    likeness (no pattern: a greeting's pattern opens the turn) in a turn after the
    conversation's opening that asks (:func:`shared.questions.asks_as_typed`) and opens
    with a question or a bid (:data:`_ASKS_OR_BIDS`): "how do you say good morning
    properly", "what about good morning" name a greeting, they do not greet (each was
    "Hello again, Nadia!"). On the eighteen training sets, all three such turns were only
    the LLM's; a greeting that opens the turn and asks after it ("morning again, you
    there?") still greets, and on an opening turn a greeting with a question is how people
    say hello ("olá, tudo bem?", "salam, kifak?": 21 of 24 the greeting's). None
    otherwise."""
    if found.intent != "greeting" or found.method != "similarity":
        return None
    if not asks_as_typed(text) or _ASKS_OR_BIDS.search(text) is None:
        return None
    return Intent(
        intent=None,
        confidence=found.confidence,
        method=None,
        nearest=found.nearest,
        likeness=found.likeness,
    )


#: Intents that greet when they open a conversation: "sup", "how's your day been?" said
#: first is how a person says hello.
GREETS_FIRST = frozenset({"how_are_you"})


def asks_how_first(found: Intent) -> Intent:
    """``found``, read on the conversation's opening turn, with ``greeting`` among the
    intents it also has when it surely asks how the bot is ("sup", "wassup chorus",
    "hiya, how's your day been?"): the greeting's script opens (it asks the user's name,
    which people then give, whatever the bot answered), as for "hi, how are you?"."""
    if found.intent not in GREETS_FIRST or found.confidence < GREETS_FIRST_FROM:
        return found
    if "greeting" in found.also:
        return found
    return found.model_copy(update={"also": [*found.also, "greeting"]})


#: How sure the reading of such an intent must be: the skill selector's floor.
GREETS_FIRST_FROM = 0.7


service = Service(
    "intents",
    description="Intent of the newest utterance: patterns, then similarity to examples.",
    never_changes_view=True,
)


@service.annotator
async def annotate(dialog: DialogView) -> Intent:
    before = dialog.bot_utterance
    if before is None:
        return annotation(dialog.last_utterance.text, None)
    return annotation(dialog.last_utterance.text, before.text, before.active_skill)


@lru_cache(maxsize=KEPT)
def annotation(said: str, line: str | None, skill: str | None = None) -> Intent:
    """The annotation of ``said`` after the bot's ``line``, said by ``skill``: a function
    of the three alone, so the last :data:`KEPT` are kept (read-only: the SDK sends a
    copy)."""
    # careless chat typing read the careful way first ("whats ur name", shared/spelling.py)
    text = spelling.normalise(said)
    # the conversation's opening turn is the one the bot has not yet answered
    found = classify_turn(text, opening=line is None)
    if text.strip():
        # one reading of the turn every skill's confidence takes (shared/reading.py); it
        # weighs a reply by the bot's line it answers
        found.reading = reading.read(text, line, found.model_dump(), skill)
    return found


app = service.app
# the spelling dictionary loaded at start-up, not on the first turn (shared/spelling.py)
spelling.warm()
# and the turn's reading: a bad file stops the start-up, naming it, and what parsing its
# JSON leaves in the heap is given back with the rest of the start-up's (the served agent
# trims the heap once started): about 8 MB less than read on the first turn
reading.shipped()
