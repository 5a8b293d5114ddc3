"""One learned reading of a turn: how likely each cheap skill is to fit it, and the LLM alone.

The skills' curves (:mod:`shared.calibration`) tell how often *one kind of answer* fitted
at a raw score: a pattern's hit, a retrieval's cosine. They do not see the turn as a whole,
and rules and curves fitted on one writer's conversations read another writer's turns
poorly. The reading looks at the turn itself: what the user said (its embedding,
:mod:`shared.meaning`), the bot's previous line (its embedding, whether it asked
something, and its kind: the LLM's, read by its kind alone, or a cheap skill's question,
:func:`line_kind`; one of the bot's jokes is read without its words too), the intents
annotator's scores, and which of the set's most common words and pairs of words the
utterance holds (:func:`grams_of`: the averaged embedding loses the order of the words,
which tells "is it ok to ..." from "it is ok to ..."). A small network, one hidden layer
shared by the labels and a logistic output per label, fitted on a labelled set's turns
(``fits``: which cheap skill may answer, or only the LLM) by :mod:`bench.calibrate`,
gives each label's probability.
A logistic regression per label, the reading before it, weighed each feature on its own;
the hidden layer can weigh them together (the same words after the bot's question and on
the LLM's thread), and with each training set left out in turn it told small talk's
turns from the LLM's better on every one of them (bench/journal/routing.md). Three such
networks from different random starts are fitted and their log-odds averaged, which one
wider hidden layer holds exactly (their units side by side, the output weights divided
by three): one start alone moved the held-out figures between refits. The weights live
in ``reading.json`` beside this module (some 185,000 numbers: numpy only, no model
library in the served agent; two products of a matrix and a vector per turn). A
file without a hidden layer, as readings fitted before it were, is read as a logistic
regression per label.

The intents annotator computes the reading once per turn (it has the utterance's
embedding and its own scores already) and publishes it under ``annotations["intents"]
["reading"]``; every skill's :func:`shared.calibration.calibrated` takes it from there, so
the skills and the response selector work from one reading. There it is combined with the
skill's calibrated chance by :class:`Combiner`, a second small logistic regression fitted
on answers the reading had not seen: a cheap answer whose skill the reading finds
unlikely is demoted (fewer wrong cheap answers, fewer pretenders without the LLM), and one
it strongly agrees with may stand where the curve alone would have asked the LLM.

A skill the file has no combiner for is left as it was, its calibrated chance alone: a
deployment's own skill before anyone labelled its turns, and a skill whose answers on the
labelled set were too few, or too uniformly right, to say what the reading adds to its
curve (the shipped FAQ until train5: too few of its answers on the labelled sets did
not fit; bench/reading.py's ``MIN_EACH``). An operator refits the file on
their own labelled set (``python -m bench.calibrate --set mine.jsonl``; docs/turns.md).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    ValidationError,
    model_validator,
)

if TYPE_CHECKING:
    import numpy as np

    from agent.sdk import DialogView

READING_FILE = Path(__file__).with_name("reading.json")
#: The environment variable naming another reading file, or ``off``: no reading, every
#: skill's calibrated chance alone (as :mod:`bench.calibrate` needs to fit it again).
READING_VARIABLE = "SKILL_READING"
#: The probabilities kept in the annotation: enough to tell 0.5 % from 1 %.
DIGITS = 4
#: A chance is taken as at least this far from 0 and 1 before its log-odds: a curve's
#: 1.0 is a share of a few dozen answers, not a certainty.
EDGE = 0.01
#: The reading's probability from which it may raise a curve's chance: "strongly agrees".
RAISE_FROM = 0.55
#: The reading's probability from which a skill whose own matcher is silent may answer by
#: the reading alone (:func:`answer_by_reading`): "the turn is this skill's", judged on
#: dev 5-fold (docs/performance.md).
ANSWER_FROM = 0.6
#: The intents annotator's likeness from which its nearest intent says which of a skill's
#: answers the reading's turn wants, when it has no sure intent. 0.3 until small talk
#: stopped answering turns that ask what its lines do not hold (skills/smalltalk/asks.py);
#: from 0.25 since, K-fold on dev, train and train2 asked the LLM on 0.5 points fewer
#: turns with no more wrong cheap answers (0.2 added one, docs/performance.md).
AGREE_FROM = 0.25
#: A pattern's reading under this confidence explains only part of the turn and is no
#: intent to agree with ("can you help me write a birthday message for my grandma?" is
#: ``abilities`` beside a task of its own: the intents annotator's partial 0.6).
SURE = 0.7
#: The skills that answer by the reading when their matcher is silent, each with the
#: intents annotator's intents that choose its answer: the reading says whose turn it is,
#: the intent which of that skill's lines (smalltalk's persona line for the intent). A
#: skill not named here never answers by the reading alone. The greeting was tried and
#: not kept: by the reading alone it greeted a request for a name ("what should I name
#: my puppy?"), and the 5-fold wrong cheap answers rose.
ANSWERS_BY_READING: dict[str, frozenset[str]] = {
    "smalltalk": frozenset({"how_are_you", "thanks", "farewell", "bot_identity", "abilities"}),
}
#: Intents whose line answers a statement only: a goodbye or a thank-you to a question
#: ("What's the weather like today?", nearest the goodbyes) answers nothing.
STATEMENTS_ONLY = frozenset({"thanks", "farewell"})
#: The likeness from which one of those closers is guessed as the nearest intent, here and
#: by small talk's own reading by likeness (``skills.smalltalk.matchers``): one bar for
#: "the user is leaving". Under it, on the training sets' runs, the closer the reading
#: named was a reaction or news as often as a goodbye: "i dont really have anyone to talk
#: to", "honestly exhausted, just finished a 12 hour night shift" got "Goodbye! It was nice
#: talking to you.", "that's wild" and "oh it works!! I am so happy" got "You're welcome!"
#: (9 of 16 goodbyes and all 7 thank-yous so given did not fit what was said); such a turn
#: is nodded to, answered as a statement, or left to others.
CLOSER_FROM = 0.4
#: Intents whose line answers a question to the bot ("I'm doing great, thanks for asking!
#: How are you?", what it can do, who it is): as the nearest intent of a statement they
#: answered something else. On the training sets' runs, 35 of the 40 how-are-you lines
#: and 13 of the 16 abilities lines so given answered a statement they did not fit ("Had a
#: really rough day", "ok that makes sense", "going to crete on friday!"). The reading
#: still says the turn is the skill's; it is answered as a statement (:data:`STATE`).
QUESTIONS_ONLY = frozenset({"how_are_you", "bot_identity", "abilities"})
#: What :func:`answer_by_reading` names instead of an intent when the turn is a statement
#: replying to the skill's own question ("I read a lot, mostly crime novels" after "Do you
#: have a hobby?"): no intent says which line, the reply does; the skill acknowledges it.
REPLY = "reply"
#: The reading's probability from which such a reply is the skill's: the bot's question
#: and the reading's agreement stand for the intent a reply has none of. From 0.6 or 0.7
#: it answered a reply only the LLM fitted, fitted on dev and measured on train; since the
#: reading is fitted on six sets, 0.6 answered six more replies out of fold on them, each
#: small talk's, and none only the LLM fits (K-fold, 4,678 turns, docs/performance.md).
REPLY_FROM = 0.6
#: What :func:`answer_by_reading` names when the turn is a few words of a statement late
#: in a conversation that no matcher of the skill read ("cheerio for now, my friend",
#: "huh TIL", "laters, gotta dash", "tack så mycket!"): no intent says which line, and the
#: skill nods (small talk's ``unread`` line, which fits thanks, a goodbye and a reaction).
NOD = "nod"
#: The reading's probability from which such a short statement is the skill's. Out of
#: fold on the five training sets (K-fold, 3,990 turns), from 0.7 the nod answered 26
#: turns the LLM was asked for (a fitting cheap answer each) and one only the LLM fits;
#: from 0.6 two more only the LLM fits. 0.6 since small talk reads more requests and
#: questions on the LLM's answer as beyond it (skills/smalltalk/asks.py): out of fold on
#: the six training sets, 0.6 answered eight more turns, all small talk's.
NOD_FROM = 0.6
#: What :func:`answer_by_reading` names when the turn is a statement of any length late in
#: a conversation, neither a reply to the greeting's line nor a question, bid or name, that
#: no matcher of the skill read or read surely ("it's pouring with rain here", "knackered
#: tbh, been at work since six", "lol same, im always on my laptop"): no intent says which
#: line, the statement's mood does (small talk's empathy, gladness or interest).
STATE = "state"
#: The reading's probability from which such a statement is the skill's: out of fold on
#: the six training sets (K-fold, 4,678 turns), from 0.7 it answered turns small talk fits
#: and none only the LLM fits; from 0.65 and 0.6, one and two more only the LLM fits.
#: 0.6 since small talk reads more requests and questions on the LLM's answer as beyond
#: it: out of fold, nine more turns, all small talk's (docs/performance.md).
STATE_FROM = 0.6
#: A statement the reading is less sure of is still the skill's where the reading weighs
#: it against the LLM's and finds it much the likelier of the two: from a reading of
#: :data:`STATE_AGREE_FROM` for the skill, when its share of the two probabilities (the
#: skill's, and "only the LLM"'s) is :data:`STATE_SHARE_FROM` or more, and not right after
#: the LLM's line (there a statement often carries on its thread, label rule 9, which the
#: two readings tell apart worse). That share is then the answer's chance: out of fold on
#: the six training sets such statements held small talk's turns and none only the LLM
#: fits (docs/performance.md).
STATE_AGREE_FROM = 0.4
STATE_SHARE_FROM = 0.6
#: What :func:`answer_by_reading` names when the turn is a question put to the bot about
#: itself (the caller says: ``asking_bot``, :func:`shared.asking.on_its_own_life`) in which
#: the intents annotator reads no intent at all: "do u have a doggy", "you ever tried
#: kava?", "do you ever get bored waiting for people". No intent's line answers it and no
#: persona topic may be near enough; the skill answers with its line on its own life.
ASKED = "asked"
#: The reading's probability from which such a question is the skill's. Out of fold on
#: the eighteen training sets (``bench.calibrate --folds 5``), from 0.9 it answered 20
#: turns the LLM had been asked for, and 4 more it did not fit ("you speak french?", "do
#: you only know computer jokes?"); from 0.8, 26 and 8 (bench/journal/routing.md).
ASKED_FROM = 0.9
#: The reading's probability from which a statement right after the greeting's name
#: question (the caller says: ``greeted``,
#: :func:`skills.smalltalk.matchers.states_after_name_question`) is the skill's, answered
#: as a statement (:data:`STATE`): how the user is, told where the greeting asked the name
#: after a "wassup" ("nm just chillin", "am good bro, tired little"). Most replies there
#: are names no pattern reads, the greeting's, so the floor is higher than
#: :data:`STATE_FROM`'s.
GREETED_FROM = 0.8
#: On the LLM's thread (the bot's last line the LLM's kind, or only the skill's guesses
#: since: ``after_llm``), a guess from the mood stands only where the reading finds the
#: turn far likelier the skill's than the LLM's: the skill's share of the two
#: probabilities (:func:`share_beside_llm`) this or more (:func:`stands_on_thread`). There
#: a statement mostly carries on what the LLM was asked (label rule 9), and the reading's
#: probability for the skill alone, raised by the combiner, kept such guesses.
THREAD_SHARE_FROM = 0.7
#: The skills that answer a reply to their own question by the reading alone, where their
#: matcher is silent, each with the reading's probability from which they do
#: (:func:`reply_by_reading`): right after the greeting asked the user's name, a reply no
#: pattern of it read ("Haruto desu", "Ines from Porto", "not really in the mood for
#: names", "nah skip that") is the greeting's from 0.9. Out of fold on the six training
#: sets, the replies to the name question left to the LLM held no turn only the LLM fits
#: from 0.85 up, and two of small talk's ("what's your name?" back, which the intents
#: annotator reads for itself) from 0.9 (docs/performance.md).
REPLIES_BY_READING: dict[str, float] = {"greeting": 0.9}
#: The skills that answer a conversation's opening turn by the reading alone, where their
#: matcher is silent and the intents annotator reads no intent in it at all (only a
#: nearest one), each with the reading's probability from which they do
#: (:func:`opens_by_reading`): "heyo bot", "hallo there bot", "oi little bot", "ola, sou
#: a Inês" are greetings no pattern reads (their "bot" is nearest the bot-identity
#: examples), and the greeting opens its script from 0.7. Out of fold on the six
#: training sets, such opening turns left to the LLM held nine greetings from 0.7 and no
#: turn only the LLM fits (docs/performance.md).
OPENS_BY_READING: dict[str, float] = {"greeting": 0.7}
#: The skills that answer from a weaker passage by the reading alone, where their own
#: gates are silent (the passage under their threshold, or far in meaning from the
#: question), each with the reading's probability from which they do
#: (:func:`passage_by_reading`): "how do I connect it to OpenAI?", "whos behind this
#: bot?", "which env variable sets the model?" are questions about Chorus asked loosely,
#: whose best passage the retrieval is unsure of. Of the training sets' turns that ask
#: something, the reading's probability for the knowledge skill (out of fold) told those
#: labelled for it from the others better than any of the retrieval's scores (ROC AUC
#: 0.97, against 0.90 for the passage's cosine and 0.85 for its confidence;
#: bench/journal/routing.md).
PASSAGES_BY_READING: dict[str, float] = {"knowledge": 0.6}
#: The reading's label for turns only the LLM fits (bench/reading.py's labels).
LLM_LABEL = "llm"
#: The answer type (and the ``routing`` kind the inspector shows) of a skill's answer
#: chosen by the turn's reading rather than by its own matcher or score: the greeting's
#: reply to its name question, small talk's line for the intent read, the knowledge
#: skill's weaker passage. Its chance is the reading's; bench/calibrate.py replays it.
BY_READING = "by_reading"
#: The embedding's width (:mod:`shared.meaning`).
WIDTH = 256
_WORDS = re.compile(r"\w+")
#: A word of :func:`grams_of` (lowercase letters, digits, an apostrophe), or a question or
#: exclamation mark, which a pair of words keeps in place ("? </s>").
_GRAM = re.compile(r"[a-z0-9']+|[?!]")


#: The decimals a fitted weight is written with (bench/reading.py rounds to them).
WEIGHT_DIGITS = 5


def _numbers(value: Any, dimensions: int) -> np.ndarray:
    """A list of numbers (``dimensions`` 1) or of rows of them (2) as one array of
    float64, which holds every number the file wrote exactly: 182,000 weights as Python
    floats in lists took 13 MB of each process that reads the file, as an array 1.5 MB
    (docs/performance.md, "The served agent's memory")."""
    import numpy as np

    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        array = None
    what = "a list of numbers" if dimensions == 1 else "a list of rows of numbers, all as long"
    if array is None or array.ndim != dimensions or not np.isfinite(array).all():
        raise ValueError(f"needs {what}")
    return array


def _written(array: np.ndarray) -> list[Any]:
    """The array as the file holds it: lists of numbers of :data:`WEIGHT_DIGITS` decimals."""
    import numpy as np

    listed: list[Any] = np.round(array, WEIGHT_DIGITS).tolist()
    return listed


if TYPE_CHECKING:
    Vector = np.ndarray
    Matrix = np.ndarray
else:
    Vector = Annotated[
        Any, BeforeValidator(lambda v: _numbers(v, 1)), PlainSerializer(_written, return_type=list)
    ]
    Matrix = Annotated[
        Any, BeforeValidator(lambda v: _numbers(v, 2)), PlainSerializer(_written, return_type=list)
    ]


class Combiner(BaseModel):
    """The chance that a skill's answer fits, from its calibrated chance ``c`` and the
    reading's probability ``p`` for that skill: ``sigmoid(chance * logit(c) + reading *
    logit(p) + bias)``, fitted on answers neither the curves nor the reading were fitted
    on (bench/reading.py)."""

    model_config = ConfigDict(extra="forbid")

    chance: float
    reading: float
    bias: float

    def __call__(self, chance: float, reading: float) -> float:
        z = self.chance * logit(chance) + self.reading * logit(reading) + self.bias
        return 1.0 / (1.0 + math.exp(-z))


class ReadingModel(BaseModel):
    """``reading.json``: the labels, the intents the features name, the hidden layer (one
    row of weights per unit, over :func:`features`, and its bias), one row of weights per
    label (over the hidden units; over the features in a file without a hidden layer)
    and its bias, and the combiner of each skill whose answers were enough to weigh the
    reading against its curve; a skill with none keeps its curve's chance alone."""

    model_config = ConfigDict(extra="forbid")

    labels: list[str] = Field(min_length=1)
    intents: list[str]
    hidden: Matrix | None = None
    hidden_bias: Vector | None = None
    weights: Matrix
    bias: Vector
    combiners: dict[str, Combiner]
    #: how many labelled turns it was fitted on
    turns: int = Field(ge=0)
    #: the words and pairs of words (:func:`grams_of`) whose presence in the utterance is
    #: a feature each, after the others; none in a file fitted before they were
    grams: list[str] = Field(default_factory=list)
    _matrix: Any = PrivateAttr(default=None)
    _hidden_matrix: Any = PrivateAttr(default=None)
    _bias: Any = PrivateAttr(default=None)
    _gram_index: dict[str, int] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _shape(self) -> ReadingModel:
        if len(set(self.grams)) != len(self.grams):
            raise ValueError("grams holds each word or pair once")
        features = feature_count(self.intents, self.grams)
        if (self.hidden is None) != (self.hidden_bias is None):
            raise ValueError("hidden and hidden_bias come together, or neither")
        if self.hidden is not None and self.hidden_bias is not None:
            if not len(self.hidden) or len(self.hidden_bias) != len(self.hidden):
                raise ValueError("hidden needs at least one unit, and hidden_bias one per unit")
            if self.hidden.shape[1] != features:
                raise ValueError(f"each row of hidden needs {features} values (the features)")
        if len(self.weights) != len(self.labels) or len(self.bias) != len(self.labels):
            raise ValueError("weights and bias need one entry per label")
        width, of = (
            (features, "the features")
            if self.hidden is None
            else (len(self.hidden), "the hidden units")
        )
        if self.weights.shape[1] != width:
            raise ValueError(f"each row of weights needs {width} values ({of})")
        return self

    def gram_index(self) -> dict[str, int]:
        """Each of :attr:`grams` and its place among them, made once per model."""
        if self._gram_index is None:
            self._gram_index = {gram: i for i, gram in enumerate(self.grams)}
        return self._gram_index

    def combiner_for(self, skill: str) -> Combiner | None:
        """The combiner of ``skill``'s answers, or None: its curve alone."""
        return self.combiners.get(skill)

    def matrix(self) -> np.ndarray:
        """The weights in float32, made once per model: the products a turn's reading
        takes (the file's float64 is for writing it again as it was)."""
        if self._matrix is None:
            self._matrix = self.weights.astype("float32")
        made: np.ndarray = self._matrix
        return made

    def output_bias(self) -> np.ndarray:
        """The bias of each label in float32, made once per model."""
        if self._bias is None:
            self._bias = self.bias.astype("float32")
        made: np.ndarray = self._bias
        return made

    def hidden_layer(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The hidden layer's weights and bias in float32, made once per model; None for a
        reading without one."""
        if self.hidden is None or self.hidden_bias is None:
            return None
        if self._hidden_matrix is None:
            self._hidden_matrix = (
                self.hidden.astype("float32"),
                self.hidden_bias.astype("float32"),
            )
        made: tuple[np.ndarray, np.ndarray] = self._hidden_matrix
        return made


class BadReading(ValueError):
    """A reading file of the wrong shape; the message names the file and the field."""


def logit(p: float) -> float:
    p = min(1.0 - EDGE, max(EDGE, p))
    return math.log(p / (1.0 - p))


def feature_count(intents: Sequence[str], grams: Sequence[str] = ()) -> int:
    """The embeddings of the utterance and of the bot's last line, each intent's score as
    read and as nearest, :data:`_CHEAP` cheap features, and one per word or pair of
    ``grams``."""
    return 2 * WIDTH + 2 * len(intents) + _CHEAP + len(grams)


def grams_of(text: str) -> set[str]:
    """The words of ``text`` and its pairs of neighbouring words, the start and the end
    marked ("<s> how", "? </s>"). The embedding averages the words' meanings, so it
    cannot tell "is it weird to ..." (a question only the LLM answers) from a statement of
    the same words, nor where a word stands; the pairs keep the opening and the order that
    say what kind of turn it is."""
    words = _GRAM.findall(text.lower())
    pairs = zip(["<s>", *words], [*words, "</s>"], strict=True)
    return {*words, *(f"{a} {b}" for a, b in pairs)}


_CHEAP = 7
#: The skills whose line before a turn is the LLM's kind of answer: the LLM's own, and the
#: fallback's, which stands for it where no LLM runs (the training sets are run without
#: one, so a feature that told them apart would learn nothing a served turn has).
LLM_KIND = frozenset({"llm", "fallback", "fallback_response"})


def line_kind(previous: str | None, previous_skill: str | None) -> tuple[float, float]:
    """What kind of line the turn answers, as two features: the LLM's (or the fallback's,
    :data:`LLM_KIND`), or a cheap skill's question ("What's your name?", "Do you have a
    hobby?"). A user carries on the LLM's thread ("tell me more", "we were together four
    years") where a cheap skill's question invites a reply it may take. Unknown (None)
    reads as neither."""
    if not previous or previous_skill is None:
        return 0.0, 0.0
    if previous_skill in LLM_KIND:
        return 1.0, 0.0
    return 0.0, 1.0 if "?" in previous else 0.0


def features(
    text: str,
    previous: str | None,
    intent: Mapping[str, Any],
    intents: Sequence[str],
    previous_skill: str | None = None,
    grams: Mapping[str, int] | None = None,
) -> np.ndarray:
    """The reading's features of one turn: ``text`` as the annotator read it (spelling
    normalised), the bot's last line (None on the first turn) and the skill that said it
    (:func:`line_kind`), the intents annotator's reading (``intent``, ``confidence``,
    ``nearest``, ``likeness``) over the ``intents`` the model names, and which of the
    model's ``grams`` (each with its place, :meth:`ReadingModel.gram_index`) the text holds."""
    import numpy as np

    from shared import meaning  # wordllama: only where a reading is made
    from shared.jokes import is_joke  # pyjokes: the same

    said = np.asarray(meaning.meaning_of(text), dtype=np.float32)
    kind = line_kind(previous, previous_skill)
    # the LLM's line is read by its kind alone: the training sets are run without the LLM,
    # so its words there are the fallback's few lines, and a served turn's are the LLM's
    # own, which a reading fitted on the fallback's words would read as noise; so is one
    # of the bot's jokes, whose words (a shower, a bankruptcy) say nothing of the reply
    # (shared/jokes.py)
    before = (
        np.asarray(meaning.meaning_of(previous), dtype=np.float32)
        if previous and not kind[0] and not is_joke(previous)
        else np.zeros(WIDTH, dtype=np.float32)
    )
    read = np.zeros(len(intents), dtype=np.float32)
    near = np.zeros(len(intents), dtype=np.float32)
    index = {name: i for i, name in enumerate(intents)}
    if intent.get("intent") in index:
        read[index[intent["intent"]]] = float(intent.get("confidence") or 0.0)
    if intent.get("nearest") in index:
        near[index[intent["nearest"]]] = float(intent.get("likeness") or 0.0)
    words = len(_WORDS.findall(text))
    cheap = np.array(
        [
            1.0 if "?" in text else 0.0,
            # whether the bot's line asked, for a line read by its words only: the LLM's
            # kind of line is its kind alone (the fallback's twelve lines, some asking,
            # picked at random, made the same turn read two ways from one run to the next)
            1.0 if previous and not kind[0] and "?" in previous else 0.0,
            1.0 if not previous else 0.0,
            min(words, 20) / 10.0,
            1.0 if intent.get("method") == "pattern" else 0.0,
            *kind,
        ],
        dtype=np.float32,
    )
    held = np.zeros(len(grams or {}), dtype=np.float32)
    if grams:
        held[[grams[g] for g in grams_of(text) if g in grams]] = 1.0
    return np.concatenate([said, before, read, near, cheap, held])


def probabilities(model: ReadingModel, row: np.ndarray) -> dict[str, float]:
    """Each label's probability for one turn's features."""
    import numpy as np

    layer = model.hidden_layer()
    if layer is not None:  # rectified units, as the network was fitted
        weights, bias = layer
        row = np.maximum(weights @ row + bias, 0.0)
    z = model.matrix() @ row + model.output_bias()
    p = 1.0 / (1.0 + np.exp(-z.astype(np.float64)))
    return {label: round(float(v), DIGITS) for label, v in zip(model.labels, p, strict=True)}


def load(path: Path) -> ReadingModel:
    try:
        return ReadingModel.model_validate_json(path.read_bytes())
    except ValidationError as error:
        raise BadReading(f"{path}: {error}") from None


@cache
def shipped() -> ReadingModel | None:
    """The reading in use, read once per process; None when switched off or absent."""
    chosen = os.environ.get(READING_VARIABLE, "")
    if chosen == "off":
        return None
    path = Path(chosen) if chosen else READING_FILE
    return load(path) if path.exists() or chosen else None


def read(
    text: str,
    previous: str | None,
    intent: Mapping[str, Any],
    previous_skill: str | None = None,
) -> dict[str, float] | None:
    """The shipped reading of one turn, or None without a reading file."""
    model = shipped()
    if model is None:
        return None
    return probabilities(
        model,
        features(text, previous, intent, model.intents, previous_skill, model.gram_index()),
    )


def sure_intent(annotations: Mapping[str, Any] | None) -> str | None:
    """The intent the intents annotator is sure the turn has (:data:`SURE` or more: the
    skill selector's floor, from which its rules send the turn to that intent's skills),
    or None: the one reading of a turn's intent the selector and the skills share."""
    note = (annotations or {}).get("intents")
    if not isinstance(note, Mapping):
        return None
    intent, confidence = note.get("intent"), note.get("confidence")
    if not isinstance(intent, str) or not isinstance(confidence, int | float):
        return None
    return intent if confidence >= SURE else None


def sure_intent_before(dialog: DialogView) -> str | None:
    """:func:`sure_intent` of the user's turn before this one, or None: what the user had
    just asked, as skills that read a reply to the bot's answer need it ("hi how are you",
    answered with the greeting's name question, then "ya not bad")."""
    humans = [u for u in dialog.utterances[:-1] if u.speaker == "human"]
    return sure_intent(humans[-1].annotations) if humans else None


def of(annotations: Mapping[str, Any] | None) -> Mapping[str, float] | None:
    """The reading the intents annotator published for this turn, if any."""
    note = (annotations or {}).get("intents")
    found = note.get("reading") if isinstance(note, Mapping) else None
    return found if isinstance(found, Mapping) else None


def combined(skill: str, chance: float, reading: Mapping[str, float] | None) -> float | None:
    """The chance that ``skill``'s answer fits with the reading's say; None when the
    reading has nothing on that skill (then the calibrated chance stands alone)."""
    model = shipped()
    if model is None or reading is None:
        return None
    p = reading.get(skill)
    if not isinstance(p, int | float):
        return None
    combiner = model.combiner_for(skill)
    if combiner is None:
        return None
    return round(weigh(combiner, chance, float(p)), DIGITS)


def weigh(combiner: Combiner, chance: float, p: float) -> float:
    """The combiner's chance, which raises the curve's only where the reading is sure the
    skill fits (:data:`RAISE_FROM`), and then to the reading's probability at most: an
    unsure reading may demote an answer, never lift an unsure one over a skill the reading
    does not weigh (the FAQ's)."""
    weighed = combiner(chance, p)
    if p < RAISE_FROM:
        return min(weighed, chance)
    # never above what the curve or the reading says alone: both read the intents
    # annotator's scores, so adding their log-odds counts that evidence twice (a 0.75
    # curve and a 0.78 reading made 0.96, over the FAQ's sure answer to "Who made you?")
    return min(weighed, max(chance, p))


def answer_by_reading(
    skill: str,
    probabilities: Mapping[str, float] | None,
    intent: Mapping[str, Any],
    model: ReadingModel | None,
    question: bool = False,
    replying: bool = False,
    nodding: bool = False,
    stating: bool = False,
    after_llm: bool = False,
    asking_bot: bool = False,
    greeted: bool = False,
) -> tuple[float, str] | None:
    """The reading's probability for ``skill`` and the intent that chooses its answer, when
    ``skill`` may answer this turn by the reading alone (its own matcher silent): the
    reading gives it :data:`ANSWER_FROM` or more, its answers were weighed (a combiner:
    the labelled set said what the reading is worth for it), and the intents annotator's
    sure intent, or its nearest from :data:`AGREE_FROM` (a closer's from
    :data:`CLOSER_FROM`; :data:`STATE` named for a statement nearest one of
    :data:`QUESTIONS_ONLY`), is one of the skill's
    (:data:`ANSWERS_BY_READING`), and not a closer's to a ``question``
    (:data:`STATEMENTS_ONLY`); or, with no such intent, the turn is ``replying`` (a
    statement right after the skill's own question) and the reading gives the skill
    :data:`REPLY_FROM` or more: then the intent named is :data:`REPLY`; or the turn is
    ``nodding`` (a few words of a statement, late in a conversation, that no matcher of the
    skill read) and the reading gives the skill :data:`NOD_FROM` or more: then the intent
    named is :data:`NOD`; or the turn is ``stating`` (a statement late in a conversation,
    of any length) and the reading gives the skill :data:`STATE_FROM` or more (on the
    LLM's thread, ``after_llm``: the bot's last line the LLM's kind, or only the skill's
    guesses since, only where :func:`stands_on_thread`): then the intent named is
    :data:`STATE`; or, not ``after_llm``, the reading gives it :data:`STATE_AGREE_FROM` or
    more and its share beside the LLM's reading is :data:`STATE_SHARE_FROM` or more
    (:func:`share_beside_llm`): the intent named is :data:`STATE`, its chance that share;
    or the turn is a question ``asking_bot`` about its own life in which the annotator
    reads no intent, and the reading gives the skill :data:`ASKED_FROM` or more: then the
    intent named is :data:`ASKED`; or the turn is a statement ``greeted`` (right after the
    greeting's name question) and the reading gives the skill :data:`GREETED_FROM` or
    more: the intent named is :data:`STATE`. None otherwise:
    two readings that disagree leave the turn to others. ``model`` is the reading in use
    (:func:`shipped`; a fold's in bench/calibrate.py)."""
    agreeing = ANSWERS_BY_READING.get(skill)
    if agreeing is None:
        return None
    # a statement much likelier the skill's than the LLM's, away from the LLM's thread
    share = (
        share_beside_llm(skill, probabilities, model)
        if stating
        and not question
        and not after_llm
        and _weighed_from(skill, probabilities, model, STATE_AGREE_FROM) is not None
        else None
    )
    shared_state = None if share is None or share < STATE_SHARE_FROM else share
    p = _weighed_from(skill, probabilities, model, ANSWER_FROM)
    if p is None:
        return None if shared_state is None else (shared_state, STATE)
    if question:
        agreeing = agreeing - STATEMENTS_ONLY
    sure = intent.get("intent")
    partial = intent.get("method") == "pattern" and float(intent.get("confidence") or 0) < SURE
    if isinstance(sure, str) and sure in agreeing and not partial:
        return float(p), sure
    nearest, likeness = intent.get("nearest"), intent.get("likeness")
    if (
        isinstance(nearest, str)
        and nearest in agreeing
        and isinstance(likeness, int | float)
        and likeness >= (CLOSER_FROM if nearest in STATEMENTS_ONLY else AGREE_FROM)
    ):
        # a statement nearest a question to the bot: the skill's, but no such question
        return float(p), nearest if question or nearest not in QUESTIONS_ONLY else STATE
    if asking_bot and question and sure is None and p >= ASKED_FROM:
        return float(p), ASKED
    if greeted and not question and p >= GREETED_FROM:
        return float(p), STATE
    if replying and not question and p >= REPLY_FROM:
        return float(p), REPLY
    if nodding and not question and p >= NOD_FROM:
        return float(p), NOD
    if (
        stating
        and not question
        and p >= STATE_FROM
        and (not after_llm or stands_on_thread(skill, probabilities, model))
    ):
        return float(p), STATE
    return None if shared_state is None else (max(shared_state, float(p)), STATE)


def share_beside_llm(
    skill: str, probabilities: Mapping[str, float] | None, model: ReadingModel | None
) -> float | None:
    """``skill``'s share of its own and the LLM's probabilities (``p / (p + p_llm)``): how
    much likelier the reading finds the turn the skill's than the LLM's alone. None when the
    reading has no LLM label or the skill's answers were not weighed."""
    if model is None or probabilities is None or model.combiner_for(skill) is None:
        return None
    p, p_llm = probabilities.get(skill), probabilities.get(LLM_LABEL)
    if not isinstance(p, int | float) or not isinstance(p_llm, int | float) or p + p_llm <= 0:
        return None
    return round(float(p) / float(p + p_llm), DIGITS)


def stands_on_thread(
    skill: str, probabilities: Mapping[str, float] | None, model: ReadingModel | None
) -> bool:
    """Whether a guess of ``skill``'s from the mood may answer a turn on the LLM's thread:
    its share beside the LLM's reading is :data:`THREAD_SHARE_FROM` or more, or the reading
    cannot say (no reading, no LLM label, the skill's answers not weighed)."""
    share = share_beside_llm(skill, probabilities, model)
    return share is None or share >= THREAD_SHARE_FROM


def reply_by_reading(
    skill: str, probabilities: Mapping[str, float] | None, model: ReadingModel | None
) -> float | None:
    """The reading's probability for ``skill`` when ``skill`` may answer a reply to its own
    question by the reading alone (:data:`REPLIES_BY_READING`): the reading gives it that
    skill's floor or more, and its answers were weighed (a combiner). The caller says
    whether the turn is such a reply (the greeting: right after its name question). None
    otherwise. ``model`` is the reading in use (:func:`shipped`; a fold's in
    bench/calibrate.py)."""
    floor = REPLIES_BY_READING.get(skill)
    return None if floor is None else _weighed_from(skill, probabilities, model, floor)


def opens_by_reading(
    skill: str,
    probabilities: Mapping[str, float] | None,
    intent: Mapping[str, Any],
    model: ReadingModel | None,
) -> float | None:
    """The reading's probability for ``skill`` when it may answer a conversation's opening
    turn by the reading alone (:data:`OPENS_BY_READING`): the intents annotator read no
    intent in it (a greeting read in part, with a question of its own, "hi, what's a good
    name for a bakery?", is one: the turn is not the script's), the reading gives the
    skill its floor or more, and its answers were weighed. The caller says whether the
    turn opens the conversation. None otherwise."""
    floor = OPENS_BY_READING.get(skill)
    if floor is None or intent.get("intent"):
        return None
    return _weighed_from(skill, probabilities, model, floor)


#: The skills whose answers the reading rules out where it is sure the turn is the LLM's
#: alone and finds the skill unlikely: (the skill's probability under which, the LLM's
#: from which) (:func:`rules_out`). A passage over the knowledge skill's threshold on a
#: general question ("how to answer 'what is your weakness'?", "how do i work it out in
#: my head") was weighed down by a reading of 0.1-0.15 for the docs and still left over
#: an even chance by the combiner, which is fitted on every skill's answers.
RULED_OUT_BY_READING: dict[str, tuple[float, float]] = {"knowledge": (0.2, 0.7)}


def rules_out(skill: str, probabilities: Mapping[str, float] | None) -> bool:
    """Whether the reading rules out ``skill``'s answer (:data:`RULED_OUT_BY_READING`): it
    gives the skill less than its floor and "only the LLM" its ceiling or more."""
    bounds = RULED_OUT_BY_READING.get(skill)
    if bounds is None or probabilities is None:
        return False
    own, llm = probabilities.get(skill), probabilities.get(LLM_LABEL)
    if not isinstance(own, int | float) or not isinstance(llm, int | float):
        return False
    return own < bounds[0] and llm >= bounds[1]


def passage_by_reading(
    skill: str, probabilities: Mapping[str, float] | None, model: ReadingModel | None
) -> float | None:
    """The reading's probability for ``skill`` when it may answer from a weaker passage by
    the reading alone (:data:`PASSAGES_BY_READING`): the reading gives it that skill's
    floor or more, and its answers were weighed. The caller says whether the skill's own
    gates were silent and a passage was found. None otherwise."""
    floor = PASSAGES_BY_READING.get(skill)
    return None if floor is None else _weighed_from(skill, probabilities, model, floor)


def _weighed_from(
    skill: str,
    probabilities: Mapping[str, float] | None,
    model: ReadingModel | None,
    floor: float,
) -> float | None:
    """The reading's probability for ``skill`` when it is ``floor`` or more and the skill's
    answers were weighed (a combiner: the labelled set said what the reading is worth for
    it); else None."""
    if model is None or probabilities is None:
        return None
    p = probabilities.get(skill)
    if not isinstance(p, int | float) or p < floor or model.combiner_for(skill) is None:
        return None
    return float(p)
