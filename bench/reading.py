"""Fits the turn's reading (``shared/reading.json``) and its combiner on a labelled set.

:mod:`shared.reading` describes what the reading is and how the skills use it. Here it is
fitted, by :mod:`bench.calibrate` beside the curves, from the same run's turns (the
pipeline without the LLM, every skill's raw score):

- the **reading**: a network of one hidden layer (:data:`HIDDEN` rectified units) and a
  logistic output per label (each cheap skill the set names, and ``llm``), scikit-learn's
  multi-label perceptron (at fitting time only: the served agent keeps the weights and
  numpy), fitted from each of :data:`SEEDS` and the networks' log-odds averaged (so that
  a refit does not hang on one random start), of "this label fits the turn" on
  :func:`shared.reading.features` of the turn:
  the utterance as the intents annotator read it, the bot's line before it and the skill
  that said it (the run's winner of the turn before: the fallback where the LLM would
  have answered), the annotator's scores, and which of the set's :data:`GRAMS` most
  common words and pairs of words the utterance holds (:func:`choose_grams`). Features
  are standardised for the fit and the scaling folded into the hidden layer's weights,
  so the served side multiplies and adds;
- the **combiner** (:class:`shared.reading.Combiner`): a logistic regression of "the
  answer fitted" on the log-odds of the answer's calibrated chance and of the reading's
  probability for its skill. Both must come from curves and a reading that had not seen
  the answer's conversation, or the combiner learns to trust a reading that remembers its
  training turns: the set's conversations are dealt into :data:`INNER_FOLDS`, and each
  fold's answers are scored by curves and a reading fitted on the others.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from threadpoolctl import threadpool_limits

from bench.routing import LLM, Hypothesis, Observed
from shared.calibration import Curve
from shared.reading import (
    Combiner,
    ReadingModel,
    feature_count,
    features,
    grams_of,
    logit,
    probabilities,
)

#: The strength of the reading's L2 penalty (scikit-learn's ``alpha``), on standardised
#: features, with :data:`HIDDEN` units and :data:`ROUNDS` passes over the turns: chosen by
#: the labels' log loss with each of the sixteen training sets left out in turn (L2 5 and
#: 32 units worse; by 5 folds, L2 1 and 10 and 128 units no better, stopping early on a
#: tenth held back worse). On the eighteen, L2 2 read the labels a little better but only
#: moved the decisions along the curve (bench/journal/routing.md).
STRENGTH = 3.0
HIDDEN = 64
ROUNDS = 200
#: The networks' starts: one network per start, their log-odds averaged (the file's one
#: hidden layer holds them side by side, :data:`HIDDEN` units each, the output weights
#: divided by their count). A single network's start moved the thirteen held-out sets'
#: pooled wrong cheap answers by up to 15 between refits of one recording (93-108); two
#: averages of three (starts 0-2 and 3-5) were 4 apart (98, 102). Out of fold they read
#: the turns no better than one network: the average buys a steadier refit, not a better
#: one. Fixed, so that a refit on the same turns gives the same file.
SEEDS = (0, 1, 2)
#: The log-odds of a label that fitted every turn of the set, or none: a certainty, where
#: the penalised network would read an operator's set whose turns all fit one skill as
#: 0.84 ("every turn or none" is all the set can say of that label).
CONSTANT_LOGIT = 8.0
#: Folds for the combiner's out-of-sample answers.
INNER_FOLDS = 5
#: A skill's answers are weighed with the reading when there were this many, this many
#: of them fitting and as many not: fewer cannot say what the reading adds to its curve,
#: and the skill keeps its curve alone. On dev and train the FAQ's 29 answers held 5 that
#: did not fit, all one kind (the bot's name in a social turn, "Goodnight, Chorus"):
#: weighed from 5, the reading silenced its fitting answer to "Who made you?"; from 10,
#: the K-fold figures on dev and train were the same, and the FAQ keeps its curve.
MIN_ANSWERS = 20
MIN_EACH = 10
#: A label seen on fewer turns than this gets no row: its skill is left to its curve.
MIN_TURNS = 8
#: The words and pairs of words (:func:`shared.reading.grams_of`) a reading weighs: the
#: ones the most turns of the set hold. Measured out of fold on the eighteen sets, 1,000
#: read a little better than 400 on all four figures (wrong cheap answers 1.36 -> 1.31 %,
#: the LLM asked 43.18 -> 43.00 %, 143 -> 137 pretenders), and so did the thirteen
#: held-out sets (bench/journal/routing.md).
GRAMS = 1000


#: Told how far a long fit is, a line at a time (bench.calibrate prints them on stderr).
Progress = Callable[[str], None]


def quiet(_: str) -> None:
    """Progress nobody reads."""


@dataclass(frozen=True)
class Turn:
    """A labelled turn's features and the labels that fit it."""

    row: np.ndarray
    fits: frozenset[str]


def intents_catcher() -> tuple[Callable[[str, bool], dict[str, object]], list[str]]:
    """The shipped intents annotator's reading of a text (and whether it opens the
    conversation), and its intents' names."""
    from annotators.intents.app import INTENTS_FILE, classify_turn  # loads the embedding
    from shared import spelling

    names = list(json.loads(INTENTS_FILE.read_text()))

    def classify(text: str, opening: bool) -> dict[str, object]:
        return classify_turn(spelling.normalise(text), opening).model_dump()

    return classify, names


def previous_lines(turns: Sequence[Observed]) -> list[str | None]:
    """The bot's line before each turn, as the run stored it; for turns saved before runs
    kept it, the answer to the turn before it in its conversation."""
    said = {(t.conversation, t.place): t.answer for t in turns}
    return [
        t.previous if t.previous is not None else said.get((t.conversation, t.place - 1))
        for t in turns
    ]


def previous_skills(turns: Sequence[Observed]) -> list[str | None]:
    """The skill that said the bot's line before each turn, as the run answered the turn
    before (None on the first turn)."""
    answered = {(t.conversation, t.place): t.skill for t in turns}
    return [answered.get((t.conversation, t.place - 1)) for t in turns]


def choose_grams(turns: Sequence[Observed], count: int = GRAMS) -> list[str]:
    """The ``count`` words and pairs of words the most of ``turns`` hold (as the intents
    annotator reads them, spelling normalised), ties in alphabetical order. Chosen by how
    common they are, not by the labels, so choosing them on every turn of a set leaves its
    folds' labels out of sample."""
    from shared import spelling

    held = Counter(g for t in turns for g in grams_of(spelling.normalise(t.text)))
    return [g for g, _ in sorted(held.items(), key=lambda kv: (-kv[1], kv[0]))[:count]]


def turn_rows(
    turns: Sequence[Observed], progress: Progress = quiet, grams: Sequence[str] = ()
) -> tuple[np.ndarray, list[str]]:
    """Every turn's features (with ``grams``), and the intents they name."""
    from shared import spelling

    progress(f"the features of {len(turns):,} turns, as the intents annotator reads them")

    classify, names = intents_catcher()
    index = {g: i for i, g in enumerate(grams)}
    rows = [
        features(
            spelling.normalise(t.text),
            previous,
            classify(t.text, previous is None),
            names,
            skill,
            index,
        )
        for t, previous, skill in zip(
            turns, previous_lines(turns), previous_skills(turns), strict=True
        )
    ]
    return np.vstack(rows) if rows else np.zeros((0, feature_count(names, grams))), names


def turn_intents(turns: Sequence[Observed]) -> list[dict[str, object]]:
    """The intents annotator's reading of every turn (its embedding is cached from
    :func:`turn_rows`)."""
    classify, _ = intents_catcher()
    return [
        classify(t.text, previous is None)
        for t, previous in zip(turns, previous_lines(turns), strict=True)
    ]


def labels_of(turns: Sequence[Observed]) -> list[str]:
    """The labels with enough turns for a row, cheap skills first, ``llm`` last."""
    counts: dict[str, int] = {}
    for t in turns:
        for name in t.fits:
            counts[name] = counts.get(name, 0) + 1
    cheap = sorted(n for n, c in counts.items() if n != LLM and c >= MIN_TURNS)
    return cheap + ([LLM] if counts.get(LLM, 0) >= MIN_TURNS else [])


def fit_reading(
    rows: np.ndarray,
    turns: Sequence[Observed],
    intents: list[str],
    strength: float = STRENGTH,
    seeds: Sequence[int] = SEEDS,
    grams: Sequence[str] = (),
) -> ReadingModel | None:
    """The reading: a network from each of ``seeds``, their log-odds averaged; None when no
    label has :data:`MIN_TURNS` turns."""
    labels = labels_of(turns)
    if not labels:
        return None
    mean = rows.mean(axis=0)
    scale = rows.std(axis=0)
    scale[scale < 1e-6] = 1.0
    standard = (rows - mean) / scale
    target = np.array([[label in t.fits for label in labels] for t in turns], dtype=int)
    hidden, hidden_bias, outer, outer_bias = [], [], [], []
    for seed in seeds:
        network = MLPClassifier((HIDDEN,), alpha=strength, max_iter=ROUNDS, random_state=seed)
        # one BLAS thread: the network's products are small (a batch of 200 turns), and a
        # second thread waiting for a busy core made a fit several times slower (a test's
        # 32 turns: 7.5 s against 0.7 s beside two other processes; the shipped sets'
        # refit: 10 min for one network against under 4 for three); and the sums come in
        # one order, whatever threads the machine gives BLAS
        with warnings.catch_warnings(), threadpool_limits(1, user_api="blas"):
            # the passes are a choice like the penalty (the measured one: stopping early
            # read the left-out turns worse), not a fit cut short
            warnings.simplefilter("ignore", ConvergenceWarning)
            # one label is a column scikit-learn reads as a binary target: same network
            network.fit(standard, target if len(labels) > 1 else target[:, 0])
        inner, out = network.coefs_
        inner_bias, out_bias = network.intercepts_
        units = inner.T / scale  # the standardisation folded into the hidden layer
        hidden.append(units)
        hidden_bias.append(inner_bias - units @ mean)
        outer.append(out / len(seeds))  # the mean of the networks' log-odds
        outer_bias.append(out_bias / len(seeds))
    weights = np.vstack(outer)
    bias = np.sum(outer_bias, axis=0)
    for j, column in enumerate(target.T):
        if column.min() == column.max():  # every turn or none: a constant, not a penalised guess
            weights[:, j] = 0.0
            bias[j] = CONSTANT_LOGIT if column[0] else -CONSTANT_LOGIT
    return ReadingModel(
        labels=labels,
        intents=intents,
        hidden=[[round(float(v), 5) for v in unit] for unit in np.vstack(hidden)],
        hidden_bias=[round(float(v), 5) for v in np.concatenate(hidden_bias)],
        weights=[[round(float(v), 5) for v in row] for row in weights.T],
        bias=[round(float(v), 5) for v in bias],
        combiners={},
        turns=len(turns),
        grams=list(grams),
    )


#: (skill, answer type) -> curve, as bench/calibrate.py fits them.
Curves = Mapping[str, Mapping[str, Curve]]
#: Fits the curves on some turns (bench/calibrate.py's ``fit``, made into curves).
CurveFitter = Callable[[Sequence[Observed]], Curves]


def chance_of(h: Hypothesis, curves: Curves) -> float | None:
    """``h``'s calibrated chance, or None when no curve knows its answer type."""
    if h.answer_type is None or h.raw is None:
        return None
    known = curves.get(h.skill, {}).get(h.answer_type)
    return None if known is None else min(1.0, max(0.0, known(float(h.raw))))


def fit_combiners(
    rows: np.ndarray,
    turns: Sequence[Observed],
    intents: list[str],
    fit_curves: CurveFitter,
    strength: float = STRENGTH,
    progress: Progress = quiet,
    grams: Sequence[str] = (),
) -> dict[str, Combiner]:
    """The combiner, on answers scored by curves and a reading fitted without them, for
    each skill with :data:`MIN_ANSWERS` such answers, :data:`MIN_EACH` of them fitting and
    as many not; one combiner for all of them, fitted on every skill's answers."""
    order = list(dict.fromkeys(t.conversation for t in turns))
    fold_of = {c: i % INNER_FOLDS for i, c in enumerate(order)}
    found: dict[str, list[tuple[float, float, int]]] = {}
    for k in range(INNER_FOLDS):
        progress(f"the combiner's answers, read without them: part {k + 1} of {INNER_FOLDS}")
        inside = [i for i, t in enumerate(turns) if fold_of[t.conversation] != k]
        kept = [turns[i] for i in inside]
        curves = fit_curves(kept)
        model = fit_reading(rows[inside], kept, intents, strength, grams=grams) if kept else None
        if model is None:
            continue
        for i, t in enumerate(turns):
            if fold_of[t.conversation] != k:
                continue
            read = probabilities(model, rows[i])
            for h in t.hypotheses:
                chance = chance_of(h, curves)
                if chance is None or h.skill not in read:
                    continue
                found.setdefault(h.skill, []).append(
                    (chance, read[h.skill], int(h.skill in t.fits))
                )
    judged = [
        skill
        for skill, answers in sorted(found.items())
        if len(answers) >= MIN_ANSWERS
        and MIN_EACH <= sum(y for _, _, y in answers) <= len(answers) - MIN_EACH
    ]
    if not judged:
        return {}
    # fitted on every skill's answers (the more, the steadier), used for the judged ones
    answers = [a for skill in sorted(found) for a in found[skill]]
    regression = LogisticRegression(C=1.0, max_iter=1000)
    regression.fit(
        np.array([[logit(c), logit(p)] for c, p, _ in answers]),
        np.array([y for _, _, y in answers]),
    )
    a, b = regression.coef_[0]
    combiner = Combiner(
        chance=round(float(a), 4),
        reading=round(float(b), 4),
        bias=round(float(regression.intercept_[0]), 4),
    )
    return dict.fromkeys(judged, combiner)


def fit(
    rows: np.ndarray,
    turns: Sequence[Observed],
    intents: list[str],
    fit_curves: CurveFitter,
    strength: float = STRENGTH,
    progress: Progress = quiet,
    grams: Sequence[str] = (),
) -> ReadingModel | None:
    """The reading on every turn (``rows`` made with ``grams``, :func:`turn_rows`), with
    its combiner fitted out of sample; None when no label has :data:`MIN_TURNS` turns
    (every skill is left to its curve)."""
    progress(f"the reading: {len(SEEDS)} networks on {len(turns):,} turns")
    model = fit_reading(rows, turns, intents, strength, grams=grams)
    if model is None:
        return None
    combiners = fit_combiners(rows, turns, intents, fit_curves, strength, progress, grams)
    return model.model_copy(update={"combiners": combiners})
