"""One arm against the reference arm, on one metric: what an operator needs to decide.

A p-value alone does not say whether to ship: 4 ratings against 4 can come out "significant"
with an interval as wide as the rating scale. So each comparison gives the difference (arm
minus reference) with its 95 % interval, the relative lift, an effect size, the test's
p-value, and a verdict that names the better arm only when each arm has at least
``MIN_SAMPLE`` units, the test's p is below alpha and the interval leaves out 0; otherwise it
says how many units per arm a difference of the observed size would need (80 % power).

The tests and intervals are scipy's: Mann-Whitney's U and Welch's t interval for ratings,
Fisher's exact test and Wilson's intervals (combined as Newcombe's hybrid score interval) for
rates. Below ``MIN_SAMPLE`` no verdict is given at all, whatever the p: the small-sample
intervals are too wide to act on and the normal approximations behind the power figures do
not hold yet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

#: Below this p-value (after the correction for several arms) a difference is significant.
ALPHA = 0.05
#: The power the sample-size figures are computed for.
POWER = 0.8
#: Fewer units than this in an arm (rated dialogs for ratings, dialogs for rates): no verdict.
MIN_SAMPLE = 30


class Comparison(BaseModel):
    """One arm against the reference arm on one metric."""

    metric: str
    arm: str = Field(description="the arm compared")
    reference: str = Field(description="the arm it is compared with (--control)")
    samples: tuple[int, int] = Field(
        description="independent units in the arm and in the reference: rated dialogs for "
        "ratings, dialogs for rates"
    )
    difference: float = Field(description="the arm's value minus the reference's")
    difference_ci95: tuple[float, float] = Field(description="95 % interval of the difference")
    relative_lift: float | None = Field(
        description="the difference over the reference's value; null: the reference's is 0"
    )
    effect_size: float
    effect_size_name: str
    test: str
    statistic: float = Field(description="the test's statistic, of the arm against the reference")
    p_value: float = Field(description="corrected for the number of arms compared (Bonferroni)")
    enough_data: bool = Field(description=f"each side has at least {MIN_SAMPLE} units")
    significant: bool = Field(description=f"enough data, p < {ALPHA} and the interval leaves out 0")
    better: str | None = Field(description="the better arm; null: the evidence does not say")
    detectable: float = Field(
        description=f"the smallest difference these samples detect with {POWER:.0%} power"
    )
    needed_per_arm: int | None = Field(
        description=f"units per arm to detect the observed difference with {POWER:.0%} power; "
        "null: no difference observed"
    )


def scipy_stats() -> Any:
    """scipy's ``stats``, imported when a comparison is made rather than with this module:
    scipy costs about a second of CPU to import, which a process that imports the module
    without comparing would pay (each pytest worker walks every module of the agent as it
    collects tests/test_errors.py)."""
    from scipy import stats  # type: ignore[import-untyped]

    return stats


def _z() -> float:
    stats = scipy_stats()
    return float(stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER))


def _finite(value: float, default: float) -> float:
    return float(value) if math.isfinite(value) else default


def _verdict(
    *,
    arm: str,
    reference: str,
    difference: float,
    interval: tuple[float, float],
    p_value: float,
    enough: bool,
    higher_is_better: bool,
) -> tuple[bool, str | None]:
    significant = enough and p_value < ALPHA and not interval[0] <= 0 <= interval[1]
    if not significant:
        return False, None
    return True, arm if (difference > 0) == higher_is_better else reference


def _needed(spread: float, difference: float) -> int | None:
    """Units per arm to detect ``difference`` with ``POWER`` at ``ALPHA`` where the two arms'
    variances sum to ``spread``; both sizes use the variance of the arms pooled, so that an
    arm whose sample happens to be all alike (variance 0) does not promise a test it cannot
    give."""
    if difference == 0:
        return None
    return max(2, math.ceil(_z() ** 2 * spread / difference**2))


def compare_ratings(
    metric: str,
    arm: str,
    reference: str,
    ratings: Sequence[float],
    reference_ratings: Sequence[float],
    corrections: int,
) -> Comparison:
    """Mean ratings (higher is better): Welch's t interval of the difference of means,
    Mann-Whitney's U of the arm's ratings against the reference's, and the rank-biserial
    correlation ``2U / (n1 n2) - 1`` as the effect size (from -1: every reference rating is
    higher, to 1: every rating of the arm is higher)."""
    stats = scipy_stats()
    n, m = len(ratings), len(reference_ratings)
    mean, reference_mean = sum(ratings) / n, sum(reference_ratings) / m
    difference = mean - reference_mean
    welch = stats.ttest_ind(ratings, reference_ratings, equal_var=False)
    ci = welch.confidence_interval(1 - ALPHA)
    interval = (_finite(ci.low, difference), _finite(ci.high, difference))
    u = stats.mannwhitneyu(ratings, reference_ratings, alternative="two-sided")
    p_value = min(1.0, _finite(u.pvalue, 1.0) * corrections)
    pooled = float(stats.tvar([*ratings, *reference_ratings]))
    enough = min(n, m) >= MIN_SAMPLE
    significant, better = _verdict(
        arm=arm,
        reference=reference,
        difference=difference,
        interval=interval,
        p_value=p_value,
        enough=enough,
        higher_is_better=True,
    )
    return Comparison(
        metric=metric,
        arm=arm,
        reference=reference,
        samples=(n, m),
        difference=difference,
        difference_ci95=interval,
        relative_lift=difference / reference_mean if reference_mean else None,
        effect_size=2 * float(u.statistic) / (n * m) - 1,
        effect_size_name="rank-biserial correlation",
        test="Mann-Whitney U",
        statistic=float(u.statistic),
        p_value=p_value,
        enough_data=enough,
        significant=significant,
        better=better,
        detectable=_z() * math.sqrt(pooled * (1 / n + 1 / m)),
        needed_per_arm=_needed(2 * pooled, difference),
    )


def _wilson(count: int, total: int) -> tuple[float, float]:
    stats = scipy_stats()
    ci = stats.binomtest(count, total).proportion_ci(1 - ALPHA, method="wilson")
    return float(ci.low), float(ci.high)


def compare_rates(
    metric: str,
    arm: str,
    reference: str,
    counts: tuple[int, int],
    reference_counts: tuple[int, int],
    units: tuple[int, int],
    corrections: int,
) -> Comparison:
    """Rates (lower is better: fallbacks), each ``(events, trials)``: Newcombe's interval of
    the difference from each rate's Wilson interval, Fisher's exact test (its statistic is
    the arm's odds ratio against the reference) and Cohen's h as the effect size.
    ``units`` are the independent units behind the trials (dialogs), for the minimum
    sample."""
    stats = scipy_stats()
    (k, n), (j, m) = counts, reference_counts
    rate, reference_rate = k / n, j / m
    difference = rate - reference_rate
    (low, high), (ref_low, ref_high) = _wilson(k, n), _wilson(j, m)
    interval = (
        difference - math.sqrt((rate - low) ** 2 + (ref_high - reference_rate) ** 2),
        difference + math.sqrt((high - rate) ** 2 + (reference_rate - ref_low) ** 2),
    )
    fisher = stats.fisher_exact([[k, n - k], [j, m - j]])
    p_value = min(1.0, _finite(fisher.pvalue, 1.0) * corrections)
    pooled_rate = (k + j) / (n + m)
    pooled = pooled_rate * (1 - pooled_rate)
    enough = min(units) >= MIN_SAMPLE
    significant, better = _verdict(
        arm=arm,
        reference=reference,
        difference=difference,
        interval=interval,
        p_value=p_value,
        enough=enough,
        higher_is_better=False,
    )
    return Comparison(
        metric=metric,
        arm=arm,
        reference=reference,
        samples=units,
        difference=difference,
        difference_ci95=interval,
        relative_lift=difference / reference_rate if reference_rate else None,
        effect_size=2 * math.asin(math.sqrt(rate)) - 2 * math.asin(math.sqrt(reference_rate)),
        effect_size_name="Cohen's h",
        test="Fisher's exact",
        statistic=_finite(float(fisher.statistic), math.inf),
        p_value=p_value,
        enough_data=enough,
        significant=significant,
        better=better,
        detectable=_z() * math.sqrt(pooled * (1 / n + 1 / m)),
        needed_per_arm=_needed(2 * pooled, difference),
    )
