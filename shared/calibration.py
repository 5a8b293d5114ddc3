"""Confidences that mean the same thing in every skill: the chance that the answer fits.

Each skill measures its certainty its own way: a regex's coverage, a TF-IDF cosine, a
constant per scripted line. The agent compares those numbers with each other and with
the LLM's ``run_below``, so 0.7 must mean the same thing whoever says it. Here it does:
a skill names which of its ways of answering a hypothesis comes from (its *answer type*:
a pattern topic, a corpus retrieval, a scripted line) and the score it measured (*raw*),
and :func:`calibrated` turns them into the share of such answers that fitted their turn
on labelled conversations: a monotone curve per skill and answer type, fitted by
:mod:`bench.calibrate` (isotonic regression) on the training sets (dev, train, train2,
train3) and stored in
``calibration.json`` beside this module.

So a skill's confidence reads as a probability, and the pipeline's thresholds as
decisions about risk: the LLM's ``run_below`` of 0.7 asks the LLM whenever no cheap answer
fits with at least a 70 % chance. An answer under :data:`SILENT_BELOW` is more likely
wrong than any use, and the skill stays silent: without the LLM the fallback's honest
"I don't know" is better than a confident misfit. A skill or answer type the file does not know
keeps its raw score, so a new skill runs before anyone calibrates it.

The hypothesis keeps both (``routing: {"skill", "kind", "raw"}``, where ``kind`` is the
answer type's wire name, kept) for the inspector and for the next fit. It needs pydantic
only, as every service has it.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, model_validator

from agent.sdk import SkillHypothesis
from shared import reading

CALIBRATION_FILE = Path(__file__).with_name("calibration.json")
#: The environment variable naming another calibration file, or ``off``: every skill's raw
#: scores, as :mod:`bench.calibrate` needs them to fit the curves again.
CALIBRATION_VARIABLE = "SKILL_CALIBRATION"
#: Below this chance of fitting, a skill says nothing: its answer is more likely wrong than
#: right, and without the LLM the fallback's honest "I don't know" serves the user better
#: (docs/performance.md has the trade-off on the dev set).
SILENT_BELOW = 0.5


class Curve(BaseModel):
    """A monotone map from a raw score to the share of answers that fitted: points of a
    step function, interpolated between them and flat beyond the ends."""

    model_config = ConfigDict(extra="forbid")

    raw: list[float] = Field(min_length=1)
    fit: list[float] = Field(min_length=1)
    #: how many labelled answers the curve was fitted on
    answers: int = Field(ge=0)

    @model_validator(mode="after")
    def _shape(self) -> Curve:
        if len(self.raw) != len(self.fit):
            raise ValueError("raw and fit must have one value each per point")
        if any(b < a for a, b in zip(self.raw, self.raw[1:], strict=False)):
            raise ValueError("raw must be in increasing order")
        if any(not 0.0 <= f <= 1.0 for f in self.fit):
            raise ValueError("fit values are shares, from 0 to 1")
        return self

    def __call__(self, raw: float) -> float:
        """The share at ``raw``: linear between the points, as numpy's ``interp``, written
        out so that a skill without numpy (the greeting) can read its curve."""
        xs, ys = self.raw, self.fit
        if raw <= xs[0]:
            return ys[0]
        if raw >= xs[-1]:
            return ys[-1]
        right = bisect_right(xs, raw)
        x0, x1, y0, y1 = xs[right - 1], xs[right], ys[right - 1], ys[right]
        return y0 if x1 == x0 else y0 + (y1 - y0) * (raw - x0) / (x1 - x0)


class CalibrationFile(RootModel[dict[str, dict[str, Curve]]]):
    """``calibration.json``: skill name -> answer type -> curve."""


class BadCalibration(ValueError):
    """A calibration file of the wrong shape; the message names the skill and answer type."""


def load(path: Path) -> dict[str, dict[str, Curve]]:
    try:
        return CalibrationFile.model_validate_json(path.read_bytes()).root
    except ValidationError as error:
        raise BadCalibration(f"{path}: {error}") from None


@cache
def _shipped() -> dict[str, dict[str, Curve]]:
    """The curves in use, read once per process: a bad file stops the first turn's
    skill with a message naming it (and the service's tests catch it first)."""
    if recording():
        return {}
    chosen = os.environ.get(CALIBRATION_VARIABLE, "")
    path = Path(chosen) if chosen else CALIBRATION_FILE
    return load(path) if path.exists() or chosen else {}


def recording() -> bool:
    """Whether the skills run uncalibrated to record their raw scores (``SKILL_CALIBRATION=
    off``, as ``bench/calibrate.py`` runs the labelled sets): a skill that answers by the
    turn's reading then records what it would have answered from (its answer type
    ``by_reading``), for the replay to weigh with each fold's reading."""
    return os.environ.get(CALIBRATION_VARIABLE, "") == "off"


def curve_of(skill: str, answer_type: str) -> Curve | None:
    return _shipped().get(skill, {}).get(answer_type)


def chance(skill: str, answer_type: str, raw: float) -> float:
    """The calibrated chance that ``skill``'s answer of ``answer_type`` scoring ``raw`` fits; the
    raw score where no curve is known."""
    curve = curve_of(skill, answer_type)
    value = curve(raw) if curve is not None else raw
    return round(min(1.0, max(0.0, value)), 4)


HypothesisT = TypeVar("HypothesisT", bound=SkillHypothesis)


def calibrated(
    hypothesis: HypothesisT,
    skill: str,
    answer_type: str,
    annotations: Mapping[str, Any] | None = None,
) -> HypothesisT | None:
    """``hypothesis`` with its confidence (the raw score) replaced by the calibrated chance
    and ``routing`` saying how; None when that chance is under :data:`SILENT_BELOW` (only
    a calibrated chance: a raw score is no chance, and a new answer type answers until fitted).

    With the human utterance's ``annotations``, the turn's reading (the intents annotator's
    ``reading``, :mod:`shared.reading`) has its say: the chance becomes the one the
    reading's combiner gives from the curve's chance and the reading's probability for
    ``skill``, and ``routing`` keeps both (``chance``, ``read``). A skill the reading has no
    label for keeps the curve's chance."""
    raw = hypothesis.confidence
    confidence = chance(skill, answer_type, raw)
    routing: dict[str, Any] = {"skill": skill, "kind": answer_type, "raw": raw}
    known = curve_of(skill, answer_type) is not None
    if known:
        found = reading.of(annotations)
        weighed = reading.combined(skill, confidence, found)
        if weighed is not None and found is not None:
            routing |= {"chance": confidence, "read": found[skill]}
            confidence = weighed
    if confidence < SILENT_BELOW and known:
        return None
    hypothesis.confidence = confidence
    setattr(hypothesis, "routing", routing)  # noqa: B010
    return hypothesis


def raw_confidence(hypothesis: Mapping[str, Any]) -> float:
    """What the skill measured before calibrating, from a hypothesis as JSON: the raw score
    its ``routing`` keeps, or its confidence when it was not calibrated."""
    routing = hypothesis.get("routing")
    if isinstance(routing, Mapping) and isinstance(routing.get("raw"), int | float):
        return float(routing["raw"])
    return float(hypothesis["confidence"])
