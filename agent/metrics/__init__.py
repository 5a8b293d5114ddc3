"""Prometheus metrics of the agent, served at ``GET /metrics``.

Each app has its own registry (no process-global collectors), and everything is derived
from a finished turn's own record (its trace and errors), so the executor stays unaware of
metrics and the numbers always agree with what is stored. :mod:`agent.metrics.services`
keeps the exact per-service numbers of the ``/pipeline`` page.
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from agent.metrics.services import ServiceStats
from agent.state.models import FALLBACK_SKILL, BotUtterance, HumanUtterance

_TURN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class FinishedTurn(Protocol):
    """What metrics read of a finished turn (the executors' ``TurnResult``): its stored
    utterances, whose trace and errors say everything that happened."""

    @property
    def utterance(self) -> HumanUtterance: ...

    @property
    def bot_utterance(self) -> BotUtterance: ...


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns = Counter("chorus_turns", "Turns answered", registry=r)
        self.turn_seconds = Histogram(
            "chorus_turn_seconds",
            "Turn latency, arrival to answer",
            buckets=_TURN_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge("chorus_turns_in_flight", "Turns being processed", registry=r)
        self.call_seconds = Histogram(
            "chorus_service_call_seconds",
            "Service call latency, by service",
            ["service", "group"],
            buckets=_CALL_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "chorus_service_errors",
            "Service failures, by service and kind",
            ["service", "kind"],
            registry=r,
        )
        self.timeouts = Counter(
            "chorus_service_timeouts", "Service calls that timed out", ["service"], registry=r
        )
        self.fallbacks = Counter(
            "chorus_fallback_answers",
            "Answers given by the fallback response (no hypothesis)",
            registry=r,
        )
        #: Exact counts and recent quantiles per service, for the ``/pipeline`` page.
        self.services = ServiceStats()

    def observe_turn(self, result: FinishedTurn, seconds: float) -> None:
        self.turns.inc()
        self.turn_seconds.observe(seconds)
        self.services.observe(result.utterance.trace)
        for call in result.utterance.trace:
            if call.outcome != "skipped":
                self.call_seconds.labels(call.service, call.group).observe(call.duration)
        for error in result.utterance.errors:
            self.errors.labels(error.service, error.kind).inc()
            if error.kind == "timeout":
                self.timeouts.labels(error.service).inc()
        if result.bot_utterance.active_skill == FALLBACK_SKILL:
            self.fallbacks.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
