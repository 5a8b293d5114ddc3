"""Fits the turn's reading (``shared/reading.json``) and its combiner on a labelled set.

:mod:`shared.reading` describes what the reading is and how the skills use it. Here it is
fitted, by :mod:`bench.calibrate` beside the curves, from the same run's turns (the
pipeline without the LLM, every skill's raw score):

- the **reading**: per label (each cheap skill the set names, and ``llm``), a logistic
  regression (scikit-learn, at fitting time only: the served agent keeps the weights and
  numpy) of "this label fits the turn" on :func:`shared.reading.features` of the turn:
  the utterance as the intents annotator read it, the bot's line before it and the skill
  that said it (the run's winner of the turn before: the fallback where the LLM would
  have answered), and the annotator's scores. Features are standardised for the fit
  and the scaling folded into the weights, so the served side multiplies and adds;
- the **combiner** (:class:`shared.reading.Combiner`): a logistic regression of "the
  answer fitted" on the log-odds of the answer's calibrated chance and of the reading's
  probability for its skill. Both must come from curves and a reading that had not seen
  the answer's conversation, or the combiner learns to trust a reading that remembers its
  training turns: the set's conversations are dealt into :data:`INNER_FOLDS`, and each
  fold's answers are scored by curves and a reading fitted on the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression

from bench.routing import LLM, Hypothesis, Observed
from shared.calibration import Curve
from shared.reading import (
    Combiner,
    ReadingModel,
    feature_count,
    features,
    logit,
    probabilities,
)

#: The inverse strength of the reading's L2 penalty (scikit-learn's ``C``), on
#: standardised features: chosen on the dev set's 5-fold estimate (docs/performance.md).
STRENGTH = 0.01
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


def turn_rows(turns: Sequence[Observed]) -> tuple[np.ndarray, list[str]]:
    """Every turn's features, and the intents they name."""
    from shared import spelling

    classify, names = intents_catcher()
    rows = [
        features(
            spelling.normalise(t.text),
            previous,
            classify(t.text, previous is None),
            names,
            skill,
        )
        for t, previous, skill in zip(
            turns, previous_lines(turns), previous_skills(turns), strict=True
        )
    ]
    return np.vstack(rows) if rows else np.zeros((0, feature_count(names))), names


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
    rows: np.ndarray, turns: Sequence[Observed], intents: list[str], strength: float = STRENGTH
) -> ReadingModel | None:
    """The reading's rows of weights, or None when no label has :data:`MIN_TURNS` turns."""
    labels = labels_of(turns)
    if not labels:
        return None
    mean = rows.mean(axis=0)
    scale = rows.std(axis=0)
    scale[scale < 1e-6] = 1.0
    standard = (rows - mean) / scale
    weights, bias = [], []
    for label in labels:
        target = np.array([label in t.fits for t in turns], dtype=int)
        if target.min() == target.max():  # every turn or none: a constant
            weights.append([0.0] * rows.shape[1])
            bias.append(8.0 if target[0] else -8.0)
            continue
        regression = LogisticRegression(C=strength, max_iter=2000)
        regression.fit(standard, target)
        w = regression.coef_[0] / scale
        weights.append([round(float(v), 5) for v in w])
        bias.append(round(float(regression.intercept_[0] - np.dot(w, mean)), 5))
    return ReadingModel(
        labels=labels,
        intents=intents,
        weights=weights,
        bias=bias,
        combiners={},
        turns=len(turns),
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
) -> dict[str, Combiner]:
    """The combiner, on answers scored by curves and a reading fitted without them, for
    each skill with :data:`MIN_ANSWERS` such answers, :data:`MIN_EACH` of them fitting and
    as many not; one combiner for all of them, fitted on every skill's answers."""
    order = list(dict.fromkeys(t.conversation for t in turns))
    fold_of = {c: i % INNER_FOLDS for i, c in enumerate(order)}
    found: dict[str, list[tuple[float, float, int]]] = {}
    for k in range(INNER_FOLDS):
        inside = [i for i, t in enumerate(turns) if fold_of[t.conversation] != k]
        kept = [turns[i] for i in inside]
        curves = fit_curves(kept)
        model = fit_reading(rows[inside], kept, intents, strength) if kept else None
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
) -> ReadingModel | None:
    """The reading on every turn, with its combiner fitted out of sample; None when no
    label has :data:`MIN_TURNS` turns (every skill is left to its curve)."""
    model = fit_reading(rows, turns, intents, strength)
    if model is None:
        return None
    combiners = fit_combiners(rows, turns, intents, fit_curves, strength)
    return model.model_copy(update={"combiners": combiners})
