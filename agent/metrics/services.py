"""Live per-service numbers for the ``/pipeline`` page: calls, latency, errors, timeouts.

Why not read them back from the Prometheus histograms: their quantiles are bucket
interpolations, too coarse to tell a 3 ms service from a 9 ms one. Here the counts are
exact since the agent started, and p50/p95 are exact over each service's last
:data:`WINDOW` calls, so they follow the service as it is now rather than its whole past.
Like ``/metrics``, the numbers are this agent process's own (each replica keeps its own).

Fed from a finished turn's trace (:meth:`ServiceStats.observe`), the same record that is
stored, so the page agrees with what the inspector shows. Everything runs on the event
loop's thread: no locks.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from agent.state.models import ServiceCall

#: How many recent calls per service the latency quantiles are computed over.
WINDOW = 1000


class ServiceSummary(BaseModel):
    """One service's row of the live table."""

    calls: int = Field(description="calls made (skipped ones not counted)")
    errors: int = Field(description="calls that failed, timeouts included")
    dropped: int = Field(
        default=0, description="speculative calls dropped because a cheaper skill answered first"
    )
    timeouts: int = Field(description="calls that ran out of time")
    skipped: int = Field(
        description="turns the service did not run in (not selected, "
        "no hypotheses, a required service failed)"
    )
    error_rate: float | None = Field(description="errors / calls; null before any call")
    p50_seconds: float | None = Field(description="median latency of the recent calls")
    p95_seconds: float | None = Field(description="95th percentile latency of the recent calls")
    window: int = Field(description="how many recent calls the quantiles cover")


def quantile(sorted_values: list[float], q: float) -> float | None:
    """The nearest-rank quantile (a value that was measured, never an interpolation)."""
    if not sorted_values:
        return None
    rank = max(math.ceil(q * len(sorted_values)), 1)
    return sorted_values[rank - 1]


@dataclass
class _Service:
    calls: int = 0
    errors: int = 0
    timeouts: int = 0
    skipped: int = 0
    dropped: int = 0
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))

    def add(self, call: ServiceCall) -> None:
        if call.outcome == "skipped":
            self.skipped += 1
            return
        self.calls += 1
        self.recent.append(call.duration)
        if call.outcome == "dropped":  # given up by the agent: not the service's failure
            self.dropped += 1
        elif call.outcome != "ok":
            self.errors += 1
        if call.outcome == "timeout":
            self.timeouts += 1

    def summary(self) -> ServiceSummary:
        durations = sorted(self.recent)
        return ServiceSummary(
            calls=self.calls,
            errors=self.errors,
            timeouts=self.timeouts,
            skipped=self.skipped,
            dropped=self.dropped,
            error_rate=self.errors / self.calls if self.calls else None,
            p50_seconds=quantile(durations, 0.5),
            p95_seconds=quantile(durations, 0.95),
            window=len(durations),
        )


class ServiceStats:
    """Counts and recent latencies of every service, by name."""

    def __init__(self) -> None:
        self._services: dict[str, _Service] = {}
        self.turns = 0

    def observe(self, trace: Iterable[ServiceCall]) -> None:
        """Count one finished turn and its service calls."""
        self.turns += 1
        services = self._services
        for call in trace:
            service = services.get(call.service)
            if service is None:  # not made for every call only to be thrown away
                service = services[call.service] = _Service()
            service.add(call)

    def summary(self, names: Iterable[str]) -> dict[str, ServiceSummary]:
        """A row for each named service, zeros for one that has not been called yet."""
        return {name: self._services.get(name, _Service()).summary() for name in names}

    def mean_seconds(self, names: Iterable[str]) -> dict[str, float]:
        """The mean latency of each named service's recent calls (0 before any call): the
        ``response_time`` of dp-agent's ``/debug/current_load``."""
        means = {}
        for name in names:
            recent = self._services.get(name, _Service()).recent
            means[name] = sum(recent) / len(recent) if recent else 0.0
        return means
