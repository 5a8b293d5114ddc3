"""The turn's lean series read on ``/metrics`` exactly as prometheus_client's own would."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from agent.metrics.lean import LeanCounter, LeanHistogram

BUCKETS = (0.001, 0.005, 0.1, 1, 10)
#: on a bound, between bounds, past the last, zero, negative, NaN
OBSERVED = (0.005, 0.0049, 0.3, 42.0, 0.0, -1.0, math.nan)


def exposition(lean: bool) -> str:
    registry = CollectorRegistry()
    kind_h = LeanHistogram if lean else Histogram
    kind_c = LeanCounter if lean else Counter
    plain = kind_h("chorus_t_seconds", "Latency", buckets=BUCKETS, registry=registry)
    by = kind_h(
        "chorus_c_seconds", "By call", ["service", "role"], buckets=BUCKETS, registry=registry
    )
    kind_h(
        "chorus_unused_seconds", "Never observed", ["service"], buckets=BUCKETS, registry=registry
    )
    turns = kind_c("chorus_t", "Turns", registry=registry)
    calls = kind_c("chorus_calls", "Calls", ["skill"], registry=registry)
    for amount in OBSERVED:
        plain.observe(amount)
        by.labels("a", "skills").observe(amount)
        turns.inc()
        calls.labels("a").inc(2.5)
    by.labels("b", "annotators").observe(0.02)
    calls.labels("b")
    text = generate_latest(registry).decode()
    # the series' creation times differ between the two runs, nothing else may
    return "\n".join(line for line in text.splitlines() if "_created" not in line)


def test_lean_series_expose_what_prometheus_client_exposes() -> None:
    assert exposition(lean=True) == exposition(lean=False)


def test_a_lean_counter_refuses_to_go_down_as_prometheus_clients_does() -> None:
    counter = LeanCounter("chorus_x", "X", registry=CollectorRegistry())
    with pytest.raises(ValueError, match="non-negative"):
        counter.inc(-1)
