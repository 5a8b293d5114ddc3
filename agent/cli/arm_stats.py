"""``chorus stats --by-arm``: an experiment's results per arm, read from the store.

Per arm: the dialogs, the turns (bot answers), the share of them that fell back, and the
mean of the dialogs' numeric ratings with its 95 % confidence interval (Student's t). A
fallback is what a product manager means by one: a turn answered by the fallback skill
(``fallback`` in the shipped pipeline, ``--fallback-skill`` otherwise) or by the pipeline's
own ``fallback_response`` when no answer survived; counting the second alone reads 0 on a
pipeline with a fallback skill, which answers before the pipeline ever has to.

Each arm is then compared with the reference arm (:mod:`agent.cli.arm_decision`): the
difference with its interval, the lift, an effect size and a verdict that names a better arm
only when the evidence is enough. Turns of one dialog are not independent draws, so a
fallback p-value near the threshold deserves more dialogs, not a decision.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from agent.cli.arm_decision import (
    ALPHA,
    MIN_SAMPLE,
    POWER,
    Comparison,
    compare_rates,
    compare_ratings,
    scipy_stats,
)
from agent.state.models import FALLBACK_SKILL, BotUtterance, Dialog
from agent.store.base import DialogReader

#: The row of the dialogs opened with no experiment.
NO_ARM = "(none)"
#: The arm the others are compared with, when there is one by this name and no --control.
DEFAULT_REFERENCE = "control"
#: The skill counted as the fallback skill, as the shipped pipeline names it.
DEFAULT_FALLBACK_SKILL = "fallback"
#: Dialogs read per page.
PAGE = 200


class ArmResult(BaseModel):
    arm: str
    dialogs: int
    turns: int
    fallback_skill_answers: int = Field(description="turns answered by the fallback skill")
    fallback_responses: int = Field(
        description="turns answered by the pipeline's fallback_response (no answer survived)"
    )
    fallbacks: int = Field(description="the two together")
    fallback_rate: float | None = Field(description="fallbacks over turns; null: no turns")
    rated_dialogs: int
    mean_rating: float | None = Field(description="null: no rated dialog")
    rating_ci95: tuple[float, float] | None = Field(
        description="95 % interval of the mean rating; null: fewer than two ratings"
    )


class ArmReport(BaseModel):
    reference: str | None = Field(description="the arm the others are compared with")
    fallback_skill: str = Field(description="the skill counted as the fallback skill")
    arms: list[ArmResult]
    comparisons: list[Comparison]
    #: why a comparison was not made (too few arms, ratings or turns)
    notes: list[str]


@dataclass
class _Tally:
    dialogs: int = 0
    turns: int = 0
    fallback_skill: int = 0
    fallback_response: int = 0
    ratings: list[float] = field(default_factory=list)

    @property
    def fallbacks(self) -> int:
        return self.fallback_skill + self.fallback_response


async def stored_dialogs(store: DialogReader) -> AsyncIterator[Dialog]:
    """Every stored dialog, open and closed, a page at a time."""
    offset = 0
    while True:
        ids = await store.list_dialog_ids(offset, PAGE, None)
        if not ids:
            return
        for dialog in await store.dialogs(ids):
            yield dialog
        offset += len(ids)


def _tally(dialogs: Iterable[Dialog], fallback_skill: str) -> dict[str, _Tally]:
    tallies: dict[str, _Tally] = {}
    for dialog in dialogs:
        tally = tallies.setdefault(dialog.arm or NO_ARM, _Tally())
        tally.dialogs += 1
        for utterance in dialog.utterances:
            if isinstance(utterance, BotUtterance):
                tally.turns += 1
                tally.fallback_skill += utterance.active_skill == fallback_skill
                tally.fallback_response += utterance.active_skill == FALLBACK_SKILL
        if dialog.rating is not None:
            tally.ratings.append(dialog.rating)
    return tallies


def _interval(ratings: list[float]) -> tuple[float, float] | None:
    if len(ratings) < 2:
        return None
    stats = scipy_stats()
    sem = float(stats.sem(ratings))
    mean = sum(ratings) / len(ratings)
    if sem == 0:
        return (mean, mean)
    low, high = stats.t.interval(0.95, len(ratings) - 1, loc=mean, scale=sem)
    return (float(low), float(high))


def _result(arm: str, tally: _Tally) -> ArmResult:
    ratings = tally.ratings
    return ArmResult(
        arm=arm,
        dialogs=tally.dialogs,
        turns=tally.turns,
        fallback_skill_answers=tally.fallback_skill,
        fallback_responses=tally.fallback_response,
        fallbacks=tally.fallbacks,
        fallback_rate=tally.fallbacks / tally.turns if tally.turns else None,
        rated_dialogs=len(ratings),
        mean_rating=sum(ratings) / len(ratings) if ratings else None,
        rating_ci95=_interval(ratings),
    )


def _compare_ratings(
    tallies: dict[str, _Tally], reference: str, notes: list[str]
) -> list[Comparison]:
    rated = {arm: t.ratings for arm, t in tallies.items() if len(t.ratings) >= 2}
    if reference not in rated or len(rated) < 2:
        notes.append(
            f"rating: not compared (the reference arm {reference} and another need two rated "
            "dialogs each)"
        )
        return []
    if len({r for sample in rated.values() for r in sample}) < 2:
        notes.append("rating: not compared (every rating is the same)")
        return []
    others = [arm for arm in rated if arm != reference]
    return [
        compare_ratings("rating", arm, reference, rated[arm], rated[reference], len(others))
        for arm in others
    ]


def _compare_fallbacks(
    tallies: dict[str, _Tally], reference: str, notes: list[str]
) -> list[Comparison]:
    counted = {arm: t for arm, t in tallies.items() if t.turns}
    if reference not in counted or len(counted) < 2:
        notes.append(
            f"fallback rate: not compared (the reference arm {reference} and another need turns)"
        )
        return []
    rows = [(t.fallbacks, t.turns) for t in counted.values()]
    if all(f == 0 for f, _ in rows) or all(f == n for f, n in rows):
        notes.append("fallback rate: not compared (the same in every arm: none or all)")
        return []
    ref = counted[reference]
    others = [arm for arm in counted if arm != reference]
    return [
        compare_rates(
            "fallback rate",
            arm,
            reference,
            (counted[arm].fallbacks, counted[arm].turns),
            (ref.fallbacks, ref.turns),
            (counted[arm].dialogs, ref.dialogs),
            len(others),
        )
        for arm in others
    ]


def _reference(arms: Iterable[str], control: str | None) -> str | None:
    """The arm the others are compared with: ``control`` when given, else the arm named
    ``control``, else the first by name (the store does not know the experiment file's
    order)."""
    names = list(arms)
    if control is not None:
        if control not in names:
            raise ValueError(f"no dialog is on arm {control!r} (arms: {', '.join(names)})")
        return control
    if not names:
        return None
    return DEFAULT_REFERENCE if DEFAULT_REFERENCE in names else names[0]


def arm_report(
    dialogs: Iterable[Dialog],
    *,
    control: str | None = None,
    fallback_skill: str = DEFAULT_FALLBACK_SKILL,
) -> ArmReport:
    """The per-arm results of these dialogs and each arm against the reference arm
    (``control``; the dialogs opened with no experiment are a row of their own, left out of
    the comparisons). ``fallback_skill`` names the skill whose answers count as fallbacks
    besides the pipeline's fallback response."""
    tallies = _tally(dialogs, fallback_skill)
    arms = dict(sorted(tallies.items(), key=lambda item: (item[0] == NO_ARM, item[0])))
    tested = {arm: tally for arm, tally in arms.items() if arm != NO_ARM}
    reference = _reference(tested, control)
    notes: list[str] = []
    comparisons: list[Comparison] = []
    if reference is not None:
        comparisons += _compare_ratings(tested, reference, notes)
        comparisons += _compare_fallbacks(tested, reference, notes)
    return ArmReport(
        reference=reference,
        fallback_skill=fallback_skill,
        arms=[_result(arm, tally) for arm, tally in arms.items()],
        comparisons=comparisons,
        notes=notes,
    )


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _table(report: ArmReport) -> list[str]:
    header = ("arm", "dialogs", "turns", "fallback rate", "rated", "mean rating", "95% interval")
    rows = [
        (
            r.arm,
            str(r.dialogs),
            str(r.turns),
            "-" if r.fallback_rate is None else f"{r.fallback_rate:.1%}",
            str(r.rated_dialogs),
            _number(r.mean_rating),
            "-" if r.rating_ci95 is None else "{:.2f} to {:.2f}".format(*r.rating_ci95),
        )
        for r in report.arms
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in (header, *rows)
    ]


def _amount(metric: str, value: float) -> str:
    """A difference as its metric reads: points of a rate, units of a rating."""
    return f"{value * 100:+.1f} points" if metric != "rating" else f"{value:+.2f}"


def _unit(metric: str) -> str:
    return "rated dialogs" if metric == "rating" else "dialogs"


def _verdict(c: Comparison) -> str:
    if not c.enough_data:
        return (
            f"too few to decide: {c.samples[0]} and {c.samples[1]} {_unit(c.metric)}, at least "
            f"{MIN_SAMPLE} per arm are needed for a verdict; at this size only a difference "
            f"of {_amount(c.metric, c.detectable).lstrip('+')} or more is detected with "
            f"{POWER:.0%} power"
        )
    if c.significant:
        return f"significant at {ALPHA:.0%}: {c.better} is better"
    needed = (
        ""
        if c.needed_per_arm is None
        else f"; a difference of this size needs about {c.needed_per_arm:,} "
        f"{'rated dialogs' if c.metric == 'rating' else 'turns'} per arm ({POWER:.0%} power)"
    )
    return f"not significant at {ALPHA:.0%}: no better arm{needed}"


def _comparison_lines(c: Comparison) -> list[str]:
    low, high = c.difference_ci95
    lift = "" if c.relative_lift is None else f", relative lift {c.relative_lift:+.1%}"
    statistic = "U" if c.test == "Mann-Whitney U" else "odds ratio"
    return [
        f"{c.metric}, {c.arm} minus {c.reference}: {_amount(c.metric, c.difference)} "
        f"(95% interval {_amount(c.metric, low)} to {_amount(c.metric, high)}){lift}",
        f"  effect size ({c.effect_size_name}) {c.effect_size:+.2f}; {c.test}: "
        f"{statistic} of {c.arm} = {c.statistic:.3g}, p = {c.p_value:.3g}",
        f"  {_verdict(c)}",
    ]


def format_report(report: ArmReport) -> list[str]:
    """The report as lines of text: a table, then each arm against the reference."""
    lines = _table(report)
    if report.arms:
        lines.append(
            f"fallback rate: turns answered by the skill {report.fallback_skill!r} or by the "
            "pipeline's fallback_response"
        )
    for c in report.comparisons:
        lines.extend(_comparison_lines(c))
    lines.extend(report.notes)
    return [line.rstrip() for line in lines]
