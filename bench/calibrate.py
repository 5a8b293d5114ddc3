"""Fits the skills' confidence curves (``shared/calibration.json``) on the dev set.

Runs the set's conversations through the shipped pipeline without the LLM and without any
calibration (``SKILL_CALIBRATION=off``: every skill's raw score, and the answers a curve
would have silenced), and keeps every hypothesis that says how it was made (``routing:
{"skill", "kind", "raw"}``, ``kind`` being its answer type, :mod:`shared.calibration`) with
whether its skill fits the turn's label. Per skill and answer type, an isotonic regression
(scikit-learn) of "fitted" on the raw score gives a monotone curve: the share of such
answers that fitted, at each score. Each point is drawn towards an even chance
(:data:`PRIOR`) by :data:`PRIOR_ANSWERS` pseudo-answers, so an answer type seen on a
handful of turns claims little either way: eight answers that all fitted read as 0.83, not
1, and keep the LLM out only when they were many (a set of a few hundred turns holds many
answer types seen a few times, whose share there is a poor guess of their share elsewhere).
Only the *fit* part of the set is used (:func:`fit_part`: two conversations of three); the
other third, and the holdout set, measure the result.

    .venv/bin/python -m bench.calibrate                # dev set -> shared/calibration.json
    .venv/bin/python -m bench.calibrate --set my.jsonl --out /tmp/mine.json

A deployment's own skills get curves the same way: they return ``routing`` (with
:func:`shared.calibration.calibrated`), and a labelled set of their turns is run here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.isotonic import IsotonicRegression

from bench.llm_turns import stack
from bench.routing import ROOT, Conversation, Observed, converse, load_set, set_path
from shared.calibration import CALIBRATION_FILE, CALIBRATION_VARIABLE

#: What an answer type is worth before any is seen, and how many answers that counts as.
PRIOR = 0.5
PRIOR_ANSWERS = 4.0
#: Points kept per curve at most (the regression's steps, thinned evenly).
MAX_POINTS = 12


def fit_part(conversations: Sequence[Conversation]) -> list[Conversation]:
    """Two conversations of every three, in the set's order; the third is for checking."""
    return [c for i, c in enumerate(conversations) if i % 3 != 2]


def samples(turns: Sequence[Observed]) -> dict[tuple[str, str], list[tuple[float, bool]]]:
    """(skill, answer type) -> (raw score, whether the skill fits the turn) of every hypothesis
    that says how it was made."""
    found: dict[tuple[str, str], list[tuple[float, bool]]] = defaultdict(list)
    for turn in turns:
        for h in turn.hypotheses:
            if h.answer_type is not None and h.raw is not None:
                found[(h.skill, h.answer_type)].append((float(h.raw), h.skill in turn.fits))
    return found


def curve(points: list[tuple[float, bool]], prior: float) -> dict[str, object]:
    raw = np.array([p[0] for p in points])
    fitted = np.array([1.0 if p[1] else 0.0 for p in points])
    regression = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    regression.fit(raw, fitted)
    xs = np.asarray(regression.X_thresholds_, dtype=float)
    ys = np.asarray(regression.y_thresholds_, dtype=float)
    # each step's weight: the answers of its block (those the regression gives its value)
    predicted = regression.predict(raw)
    weight = np.array([np.sum(np.isclose(predicted, y)) for y in ys], dtype=float)
    shrunk = (ys * weight + prior * PRIOR_ANSWERS) / (weight + PRIOR_ANSWERS)
    keep = np.unique(np.linspace(0, len(xs) - 1, min(len(xs), MAX_POINTS)).round().astype(int))
    return {
        "raw": [round(float(x), 4) for x in xs[keep]],
        "fit": [round(float(y), 4) for y in np.maximum.accumulate(shrunk[keep])],
        "answers": len(points),
    }


def fit(turns: Sequence[Observed]) -> dict[str, dict[str, dict[str, object]]]:
    curves: dict[str, dict[str, dict[str, object]]] = defaultdict(dict)
    for (skill, answer_type), points in sorted(samples(turns).items()):
        curves[skill][answer_type] = curve(points, PRIOR)
    return dict(curves)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="dev", help="dev, or a set file's path")
    parser.add_argument("--out", type=Path, default=CALIBRATION_FILE)
    parser.add_argument("--all", action="store_true", help="fit on every conversation")
    args = parser.parse_args(argv)
    conversations = load_set(set_path(args.set))
    used = conversations if args.all else fit_part(conversations)
    os.environ[CALIBRATION_VARIABLE] = "off"
    with stack(ROOT, None, False) as off:
        turns = [t for c in used for t in converse(off, c, "calibrate")]
    curves = fit(turns)
    args.out.write_text(json.dumps(curves, indent=1) + "\n")
    for skill, answer_types in curves.items():
        for answer_type, c in answer_types.items():
            print(f"{skill:10} {answer_type:18} {c['answers']:4} answers  {c['raw']} -> {c['fit']}")
    print(f"{len(used)} conversations, {len(turns)} turns: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
