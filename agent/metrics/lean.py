"""The turn's own series, counted without prometheus_client's per-update work.

Every finished turn updates a dozen series: the turn count and latency, and for each of
its service calls the call's latency and, for a skill, its call and seconds counts.
prometheus_client's ``Counter.inc`` and ``Histogram.observe`` check that the metric may
be observed, take a lock per value and walk the buckets in Python on every update: about
half of the metrics' share of a turn's CPU (docs/performance.md, "Half the CPU"). These
series are only ever updated on the event loop, so :class:`LeanCounter` and
:class:`LeanHistogram` keep plain numbers (a histogram's bucket found by ``bisect``) and
give prometheus_client the same samples when ``/metrics`` is read: they are collectors
of the app's registry (its public ``Metric`` families), named, labelled and exposed as
its ``Counter`` and ``Histogram`` would be, ``_created`` included.
"""

from __future__ import annotations

import math
import os
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import cast

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

#: A bucket's bound as prometheus_client writes its ``le`` label (``+Inf``, ``0.005``).
_go_text = cast(Callable[[float], str], floatToGoString)

#: ``_created`` samples, unless turned off as prometheus_client reads it (at import).
_CREATED = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False").lower() not in (
    "true",
    "1",
    "t",
)


class CounterSeries:
    """One label set of a :class:`LeanCounter`."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount


class HistogramSeries:
    """One label set of a :class:`LeanHistogram`: the count in each bucket (not yet
    cumulative) and the sum."""

    __slots__ = ("bounds", "counts", "created", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        self.sum += amount
        if amount == amount:  # NaN falls in no bucket, as prometheus_client counts it
            self.counts[bisect_left(self.bounds, amount)] += 1


class _Lean(Collector):
    """What both kinds share: the name, the help text, the label names, the series."""

    kind = ""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        registry.register(self)

    def describe(self) -> Iterable[Metric]:
        return [Metric(self.name, self.documentation, self.kind)]

    def _labels(self, values: Sequence[str]) -> dict[str, str]:
        return dict(zip(self.labelnames, values, strict=True))


class LeanCounter(_Lean):
    """A counter (exposed as ``<name>_total`` and ``<name>_created``), by label values."""

    kind = "counter"

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        registry: CollectorRegistry,
    ) -> None:
        super().__init__(name, documentation, labelnames, registry)
        self._series: dict[tuple[str, ...], CounterSeries] = {}
        if not self.labelnames:
            self.labels()

    def labels(self, *values: str) -> CounterSeries:
        series = self._series.get(values)
        if series is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: labels {values!r} for {self.labelnames!r}")
            series = self._series[values] = CounterSeries()
        return series

    def inc(self, amount: float = 1.0) -> None:
        """The counter without labels, counted up."""
        self._series[()].inc(amount)

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self.name, self.documentation, self.kind)
        for values, series in list(self._series.items()):
            labels = self._labels(values)
            metric.add_sample(self.name + "_total", labels, series.value)
            if _CREATED:
                metric.add_sample(self.name + "_created", labels, series.created)
        return [metric]


class LeanHistogram(_Lean):
    """A histogram (``_bucket``, ``_count``, ``_sum``, ``_created``), by label values."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        super().__init__(name, documentation, labelnames, registry)
        bounds = [float(bound) for bound in buckets]
        if bounds[-1] != math.inf:
            bounds.append(math.inf)
        self._bounds = tuple(bounds)
        self._le = tuple(_go_text(bound) for bound in bounds)
        self._series: dict[tuple[str, ...], HistogramSeries] = {}
        if not self.labelnames:
            self.labels()

    def labels(self, *values: str) -> HistogramSeries:
        series = self._series.get(values)
        if series is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: labels {values!r} for {self.labelnames!r}")
            series = self._series[values] = HistogramSeries(self._bounds)
        return series

    def observe(self, amount: float) -> None:
        """The histogram without labels, given one observation."""
        self._series[()].observe(amount)

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self.name, self.documentation, self.kind)
        for values, series in list(self._series.items()):
            labels = self._labels(values)
            total = 0.0
            for le, count in zip(self._le, list(series.counts), strict=True):
                total += count
                bucket = {**labels, "le": le}
                metric.add_sample(self.name + "_bucket", bucket, total)
            metric.add_sample(self.name + "_count", labels, total)
            metric.add_sample(self.name + "_sum", labels, series.sum)
            if _CREATED:
                metric.add_sample(self.name + "_created", labels, series.created)
        return [metric]
