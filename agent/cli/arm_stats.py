"""``chorus stats --by-arm``: an experiment's results per arm, read from the store.

Per arm: the dialogs, the turns (bot answers), the share answered by the fallback response,
and the mean of the dialogs' numeric ratings with its 95 % confidence interval (Student's
t). Whether the arms differ is left to scipy's standard tests, never to arithmetic of our
own: the ratings by Mann-Whitney's U for two arms (ratings are ordinal, seldom normal) and
Kruskal-Wallis's H for more, the fallback rates by Fisher's exact test on a 2x2 table and a
chi-square test of independence on a larger one. Turns of one dialog are not independent
draws, so a fallback p-value near the threshold deserves more dialogs, not a decision.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field
from scipy import stats  # type: ignore[import-untyped]

from agent.state.models import FALLBACK_SKILL, BotUtterance, Dialog
from agent.store.base import Store

#: The row of the dialogs opened with no experiment.
NO_ARM = "(none)"
#: Below this p-value a difference is called significant.
ALPHA = 0.05
#: Dialogs read per page.
PAGE = 200


class ArmResult(BaseModel):
    arm: str
    dialogs: int
    turns: int
    fallbacks: int
    fallback_rate: float | None = Field(description="null: no turns")
    rated_dialogs: int
    mean_rating: float | None = Field(description="null: no rated dialog")
    rating_ci95: tuple[float, float] | None = Field(
        description="95 % interval of the mean rating; null: fewer than two ratings"
    )


class Comparison(BaseModel):
    """One test of whether the arms differ."""

    metric: str
    test: str
    statistic: float
    p_value: float
    significant: bool = Field(description=f"p < {ALPHA}")


class ArmReport(BaseModel):
    arms: list[ArmResult]
    comparisons: list[Comparison]
    #: why a comparison was not made (too few arms, ratings or turns)
    notes: list[str]


@dataclass
class _Tally:
    dialogs: int = 0
    turns: int = 0
    fallbacks: int = 0
    ratings: list[float] = field(default_factory=list)


async def stored_dialogs(store: Store) -> AsyncIterator[Dialog]:
    """Every stored dialog, open and closed, a page at a time."""
    offset = 0
    while True:
        ids = await store.list_dialog_ids(offset, PAGE, None)
        if not ids:
            return
        for dialog in await store.dialogs(ids):
            yield dialog
        offset += len(ids)


def _tally(dialogs: Iterable[Dialog]) -> dict[str, _Tally]:
    tallies: dict[str, _Tally] = {}
    for dialog in dialogs:
        tally = tallies.setdefault(dialog.arm or NO_ARM, _Tally())
        tally.dialogs += 1
        for utterance in dialog.utterances:
            if isinstance(utterance, BotUtterance):
                tally.turns += 1
                tally.fallbacks += utterance.active_skill == FALLBACK_SKILL
        if dialog.rating is not None:
            tally.ratings.append(dialog.rating)
    return tallies


def _interval(ratings: list[float]) -> tuple[float, float] | None:
    if len(ratings) < 2:
        return None
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
        fallbacks=tally.fallbacks,
        fallback_rate=tally.fallbacks / tally.turns if tally.turns else None,
        rated_dialogs=len(ratings),
        mean_rating=sum(ratings) / len(ratings) if ratings else None,
        rating_ci95=_interval(ratings),
    )


def _comparison(metric: str, test: str, statistic: float, p_value: float) -> Comparison:
    p = float(p_value) if math.isfinite(p_value) else 1.0
    return Comparison(
        metric=metric, test=test, statistic=float(statistic), p_value=p, significant=p < ALPHA
    )


def _compare_ratings(tallies: dict[str, _Tally], notes: list[str]) -> Comparison | None:
    samples = [t.ratings for t in tallies.values() if len(t.ratings) >= 2]
    if len(samples) < 2:
        notes.append("ratings: not compared (fewer than two arms with two rated dialogs)")
        return None
    if len({r for sample in samples for r in sample}) < 2:
        notes.append("ratings: not compared (every rating is the same)")
        return None
    if len(samples) == 2:
        u = stats.mannwhitneyu(samples[0], samples[1], alternative="two-sided")
        return _comparison("rating", "Mann-Whitney U", u.statistic, u.pvalue)
    h = stats.kruskal(*samples)
    return _comparison("rating", "Kruskal-Wallis H", h.statistic, h.pvalue)


def _compare_fallbacks(tallies: dict[str, _Tally], notes: list[str]) -> Comparison | None:
    table = [[t.fallbacks, t.turns - t.fallbacks] for t in tallies.values() if t.turns]
    if len(table) < 2:
        notes.append("fallback rate: not compared (fewer than two arms with turns)")
        return None
    if all(row[0] == 0 for row in table) or all(row[1] == 0 for row in table):
        notes.append("fallback rate: not compared (the same in every arm: none or all)")
        return None
    if len(table) == 2:
        fisher = stats.fisher_exact(table)
        return _comparison("fallback rate", "Fisher's exact", fisher.statistic, fisher.pvalue)
    chi2 = stats.chi2_contingency(table)
    return _comparison("fallback rate", "chi-square", chi2.statistic, chi2.pvalue)


def arm_report(dialogs: Iterable[Dialog]) -> ArmReport:
    """The per-arm results of these dialogs and the tests between the arms (the dialogs
    opened with no experiment are a row of their own, left out of the tests)."""
    tallies = _tally(dialogs)
    arms = dict(sorted(tallies.items(), key=lambda item: (item[0] == NO_ARM, item[0])))
    tested = {arm: tally for arm, tally in arms.items() if arm != NO_ARM}
    notes: list[str] = []
    comparisons = [
        c
        for c in (_compare_ratings(tested, notes), _compare_fallbacks(tested, notes))
        if c is not None
    ]
    return ArmReport(
        arms=[_result(arm, tally) for arm, tally in arms.items()],
        comparisons=comparisons,
        notes=notes,
    )


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_report(report: ArmReport) -> list[str]:
    """The report as lines of text: a table, then each test's verdict."""
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
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in (header, *rows)
    ]
    for c in report.comparisons:
        verdict = "significant" if c.significant else "not significant"
        lines.append(
            f"{c.metric}: {verdict} at {ALPHA:.0%} ({c.test}, statistic {c.statistic:.3g}, "
            f"p = {c.p_value:.3g})"
        )
    lines.extend(report.notes)
    return [line.rstrip() for line in lines]
