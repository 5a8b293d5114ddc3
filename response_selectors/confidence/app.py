"""Response selector: the most confident hypothesis after penalties, and why it won.

Each hypothesis scores ``confidence - penalties``; the penalties come from its candidate
annotations and the window, so a skill needs no change to be held back:

- :data:`TOXIC_PENALTY` when ``annotations["toxicity"]["toxic"]`` is true. Confidences lie
  in 0..1, so a toxic hypothesis never wins over a clean one.
- :data:`REPEAT_PENALTY` when its text repeats the bot's previous utterance (ignoring case
  and spacing): saying the same thing twice in a row reads as a stuck bot.
- :data:`WEAK_PENALTY` when it is a calibrated cheap answer (its ``routing`` says how
  likely it is to fit) under :data:`FALLBACK_BELOW` (``SELECTOR_FALLBACK_BELOW``, a little
  under the LLM's ``run_below`` in the shipped pipeline.json): such an answer is the
  LLM's turn, and with the LLM answering it loses anyway; without it (off, down, late)
  the fallback's honest "I can't answer that" wins over a cheap skill pretending to know.

A skill's confidence is the chance that its answer fits the turn (calibrated per skill and
kind of answer: ``shared/calibration.py``), so the comparison is fair between skills, and
an LLM's answer wins over a cheap one that is less likely to fit. When the winner beat
calibrated answers, the reason says what each was and how likely it was to fit
("smalltalk: corpus, scored 0.62, fits 41 %"; with the turn's reading, also the curve's
chance and the reading's: "..., curve 55 %, read 8 %, fits 41 %"), which the inspector
shows.

Ties go to the earlier hypothesis (the pipeline's skill order). When every hypothesis is
toxic the least bad one still answers (the agent needs a choice) and the reason says so.
The reason is stored on the bot utterance (``attributes.selector_reason``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from fastapi import HTTPException

from agent.sdk import DialogView, HypothesisView, Selection, Service
from agent.sdk.errors import ConfigError

#: Larger than any confidence: a clean hypothesis always beats a toxic one.
TOXIC_PENALTY = 1.0
#: Enough to let a slightly less confident fresh answer win over a repeated one.
REPEAT_PENALTY = 0.2
#: As much as a toxic answer's: any answer that is not weak wins over a weak one (the
#: fallback's 0.1 included), and among weak ones the most confident.
WEAK_PENALTY = 1.0
#: The environment variable of :data:`FALLBACK_BELOW`; ``0`` turns the penalty off.
FALLBACK_BELOW_VARIABLE = "SELECTOR_FALLBACK_BELOW"
#: The chance of fitting under which a calibrated cheap answer gives way to the fallback
#: when no LLM answers: a little under the LLM's ``run_below`` (0.7) in the shipped
#: pipeline.json. With the LLM, an answer from 0.65 to 0.7 is still the LLM's turn (it
#: loses to the LLM's answer); without one, it is given rather than "I don't know". At
#: 0.7 the knowledge skill's passages, whose curve gives raw 0.74-0.89 a 0.6957 chance,
#: all went to the fallback unless the turn's reading raised them, which it does for a
#: conversation's first question only: "How do I restore a backup?" after a greeting got
#: "That one stumps me" in `make run`. Served on the eighteen training sets without the
#: LLM, the answers from 0.65 to 0.7 that the fallback replaced fitted their turn 30 times
#: in 39 (docs/performance.md has the figures out of fold and on the held-out sets).
DEFAULT_FALLBACK_BELOW = 0.65


def fallback_below(environ: Mapping[str, str]) -> float:
    """:data:`FALLBACK_BELOW` from ``environ``: a chance from 0 to 1."""
    raw = environ.get(FALLBACK_BELOW_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_FALLBACK_BELOW
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{FALLBACK_BELOW_VARIABLE}: {raw!r} is not a chance from 0 to 1")
    return value


FALLBACK_BELOW = fallback_below(os.environ)

#: Scores are rounded before comparing so that float noise (0.9 - 0.2 vs 0.7) cannot
#: break a tie against the earlier hypothesis.
_SCORE_DIGITS = 6

PenaltyKind = Literal["toxic", "repeat", "weak"]


@dataclass(frozen=True, slots=True)
class Penalty:
    kind: PenaltyKind
    amount: float


@dataclass(frozen=True, slots=True)
class Scored:
    """One hypothesis as ranked: ``label`` names it in the reason."""

    index: int
    label: str
    confidence: float
    penalties: tuple[Penalty, ...]
    #: how the skill calibrated its confidence ("corpus, scored 0.62"), when it says
    calibration: str | None = None

    @property
    def score(self) -> float:
        return round(self.confidence - sum(p.amount for p in self.penalties), _SCORE_DIGITS)

    @property
    def toxic(self) -> bool:
        return any(p.kind == "toxic" for p in self.penalties)


def _normalised(text: str) -> str:
    return " ".join(text.split()).casefold()


def previous_bot_text(dialog: DialogView) -> str | None:
    """What the bot said last in the window (normalised), if it said anything."""
    said = dialog.bot_utterance
    return None if said is None else _normalised(said.text)


def _is_toxic(hypothesis: HypothesisView) -> bool:
    """Only a well-formed ``{"toxic": true}`` counts; a missing note means no candidate
    annotator judged it, which is no reason to hold it back."""
    note = hypothesis.annotations.get("toxicity")
    return isinstance(note, dict) and note.get("toxic") is True


def is_weak(hypothesis: HypothesisView, below: float) -> bool:
    """A calibrated answer (its ``routing`` names its answer type: the confidence is a
    chance of fitting, shared/calibration.py) under ``below``. An uncalibrated one (the
    LLM's, the fallback's, a deployment's skill before anyone fitted it) is never weak."""
    routing = (hypothesis.model_extra or {}).get("routing")
    return isinstance(routing, dict) and "kind" in routing and hypothesis.confidence < below


def penalties(hypothesis: HypothesisView, previous: str | None) -> tuple[Penalty, ...]:
    found: list[Penalty] = []
    if _is_toxic(hypothesis):
        found.append(Penalty("toxic", TOXIC_PENALTY))
    if previous is not None and _normalised(hypothesis.text) == previous:
        found.append(Penalty("repeat", REPEAT_PENALTY))
    return tuple(found)


def calibration_of(hypothesis: HypothesisView) -> str | None:
    """The hypothesis' ``routing`` (``{"kind", "raw"}``, and ``chance`` and ``read`` when
    the turn's reading weighed it: shared/calibration.py) in words."""
    routing = (hypothesis.model_extra or {}).get("routing")
    if not isinstance(routing, dict) or not isinstance(routing.get("raw"), int | float):
        return None
    said = f"{routing.get('kind')}, scored {float(routing['raw']):.2f}"
    chance, read = routing.get("chance"), routing.get("read")
    if isinstance(chance, int | float) and isinstance(read, int | float):
        # the turn's reading had its say (shared/reading.py): the curve's chance alone,
        # and how likely the reading found this skill to fit the turn
        said += f", curve {100 * float(chance):.0f} %, read {100 * float(read):.0f} %"
    return said


def score_all(dialog: DialogView) -> list[Scored]:
    """Every hypothesis scored; a skill with several is named ``skill#index``. The weak
    penalty (:func:`is_weak`) is given only when a weak answer would otherwise win: beside
    an LLM's answer it loses anyway, and the reason does not mention it."""
    hypotheses = dialog.human_utterance.hypotheses
    previous = previous_bot_text(dialog)
    per_skill = Counter(h.skill_name for h in hypotheses)
    scored = [
        Scored(
            index=i,
            confidence=h.confidence,
            penalties=penalties(h, previous),
            label=h.skill_name if per_skill[h.skill_name] == 1 else f"{h.skill_name}#{i}",
            calibration=calibration_of(h),
        )
        for i, h in enumerate(hypotheses)
    ]
    if scored and is_weak(hypotheses[best(scored).index], FALLBACK_BELOW):
        weak = Penalty("weak", WEAK_PENALTY)
        scored = [
            replace(s, penalties=(*s.penalties, weak))
            if is_weak(hypotheses[s.index], FALLBACK_BELOW)
            else s
            for s in scored
        ]
    return scored


def best(scored: list[Scored]) -> Scored:
    """The highest score; ties to the earlier hypothesis."""
    return max(scored, key=lambda s: (s.score, -s.index))


def _others(count: int) -> str:
    if count == 0:
        return "as the only hypothesis"
    return f"over {count} other hypothes{'is' if count == 1 else 'es'}"


def calibrated_losers(winner: Scored, scored: list[Scored]) -> str:
    """The calibrated answers the winner beat, and how likely each was to fit."""
    beaten = [s for s in scored if s is not winner and s.calibration is not None]
    if not beaten:
        return ""
    listed = "; ".join(
        f"{s.label}: {s.calibration}, fits {100 * s.confidence:.0f} %" for s in beaten
    )
    return f"; it beat {listed}"


def reason(winner: Scored, scored: list[Scored]) -> str:
    """Plain when no penalty applied; otherwise the score and every penalty given; and the
    calibrated answers that lost."""
    return _reason(winner, scored) + calibrated_losers(winner, scored)


def _reason(winner: Scored, scored: list[Scored]) -> str:
    penalised = [s for s in scored if s.penalties]
    if not penalised:
        count = len(scored)
        return (
            f"{winner.label} had the highest confidence ({winner.confidence:.2f}) "
            f"of {count} hypothes{'is' if count == 1 else 'es'}"
        )
    head = (
        "every hypothesis was toxic, so the least bad was chosen: "
        if all(s.toxic for s in scored)
        else ""
    )
    listed = ", ".join(
        f"{s.label} {p.kind} (-{p.amount:.2f})" for s in penalised for p in s.penalties
    )
    return (
        f"{head}{winner.label} won with score {winner.score:.2f} "
        f"(confidence {winner.confidence:.2f}) {_others(len(scored) - 1)}; "
        f"penalised: {listed}"
    )


service = Service(
    "confidence",
    description="Chooses the most confident hypothesis, "
    "holding back toxic ones and repeats of the bot's previous utterance.",
    never_changes_view=True,
)


@service.response_selector
async def choose(dialog: DialogView) -> Selection:
    scored = score_all(dialog)
    if not scored:  # the agent skips the selector then; a direct caller gets told why
        raise HTTPException(422, "the newest human utterance has no hypotheses to choose from")
    winner = best(scored)
    return Selection(index=winner.index, reason=reason(winner, scored))


app = service.app
