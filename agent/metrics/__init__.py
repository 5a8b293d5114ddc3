"""Prometheus metrics of the agent, served at ``GET /metrics``.

Each app has its own registry (no process-global collectors), and everything is derived
from a finished turn's own record (its trace and errors), so the executor stays unaware of
metrics and the numbers always agree with what is stored. :mod:`agent.metrics.services`
keeps the exact per-service numbers of the ``/pipeline`` page.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Summary,
    generate_latest,
)

from agent.metrics.services import ServiceStats
from agent.state.models import FALLBACK_SKILL, BotUtterance, HumanUtterance
from agent.store.base import Swept

_TURN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: The ``service`` label of a failure recorded under a name that is not the pipeline's (no
#: service name can start with a parenthesis in Chorus's format).
UNKNOWN_SERVICE = "(unknown)"
#: Names that are not services but record failures of their own: ``store``, a turn whose
#: outputs the database refused.
_AGENT_PARTS = frozenset({"store"})
#: The ``arm`` label of a dialog opened before the experiment, or on an arm no longer
#: configured (no arm's name can start with a parenthesis).
NO_ARM = "(none)"


#: Buckets of the handoffs' waits: from seconds to hours.
HANDOFF_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0)


class FinishedTurn(Protocol):
    """What metrics read of a finished turn (the executors' ``TurnResult``): its stored
    utterances, whose trace and errors say everything that happened."""

    @property
    def utterance(self) -> HumanUtterance: ...

    @property
    def bot_utterance(self) -> BotUtterance: ...


class Metrics:
    """The agent's Prometheus metrics. ``services`` are the pipeline's service names, the
    only values the ``service`` label takes (besides ``store`` and :data:`UNKNOWN_SERVICE`):
    a failure can be recorded under a name a service chose (a Dream response selector names
    the skill whose attributes were refused), and a label per such name would make a new
    series each turn a selector invents one, without bound.

    With an experiment's ``arms``, the ``chorus_arm_*`` series count turns, fallbacks,
    latency and ratings per arm; their ``arm`` label takes the configured arms' names and
    :data:`NO_ARM` only. They are separate series so that the unlabelled totals (and the
    dashboards and autoscalers reading them) stay as they are."""

    def __init__(self, services: Iterable[str] = (), arms: Iterable[str] = ()) -> None:
        self._services = frozenset(services) | _AGENT_PARTS
        self._arms = frozenset(arms)
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
        self.overtaken = Counter(
            "chorus_turns_overtaken",
            "Turns whose place in the user's queue was passed over while they ran (their "
            "lease lapsed): nothing of the answer stored, the client told to retry",
            registry=r,
        )
        self.call_seconds = Histogram(
            "chorus_service_call_seconds",
            "Service call latency, by service",
            ["service", "role"],
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
        self.lifecycle = Counter(
            "chorus_lifecycle_records",
            "Records the data lifecycle removed or compacted, by rule and record",
            ["rule", "record"],
            registry=r,
        )
        self.store_records = Gauge(
            "chorus_store_records",
            "Documents or rows per collection or table, at the end of the last sweep round",
            ["collection"],
            registry=r,
        )
        self.skill_calls = Counter(
            "chorus_skill_calls", "Calls made to each skill", ["skill"], registry=r
        )
        self.skill_dropped = Counter(
            "chorus_skill_dropped",
            "Speculative skill calls dropped early: a cheaper skill answered first",
            ["skill"],
            registry=r,
        )
        self.skill_seconds = Counter(
            "chorus_skill_seconds", "Seconds spent in each skill's calls", ["skill"], registry=r
        )
        self.skill_tokens = Counter(
            "chorus_skill_tokens",
            "Tokens each skill reported spending (its hypotheses' OpenAI-style usage)",
            ["skill"],
            registry=r,
        )
        self.handoffs = Counter(
            "chorus_handoffs",
            "Dialogs handed to a person, by what asked: skill, rule or api",
            ["by"],
            registry=r,
        )
        self.handoff_returns = Counter(
            "chorus_handoff_returns",
            "Dialogs given back to the bot, by who: operator, api or timeout (no one claimed)",
            ["by"],
            registry=r,
        )
        self.handoff_claim_seconds = Histogram(
            "chorus_handoff_claim_seconds",
            "Seconds from a person being asked for to an operator claiming the dialog",
            buckets=HANDOFF_BUCKETS,
            registry=r,
        )
        self.handoff_held_seconds = Histogram(
            "chorus_handoff_held_seconds",
            "Seconds an operator held a dialog, from the claim to the handback",
            buckets=HANDOFF_BUCKETS,
            registry=r,
        )
        self.arm_turns: Counter | None = None
        if self._arms:
            self.arm_turns = Counter(
                "chorus_arm_turns", "Turns answered, by experiment arm", ["arm"], registry=r
            )
            self.arm_fallbacks = Counter(
                "chorus_arm_fallback_answers",
                "Answers given by the fallback response, by experiment arm",
                ["arm"],
                registry=r,
            )
            self.arm_turn_seconds = Histogram(
                "chorus_arm_turn_seconds",
                "Turn latency, arrival to answer, by experiment arm",
                ["arm"],
                buckets=_TURN_BUCKETS,
                registry=r,
            )
            self.arm_ratings = Summary(
                "chorus_arm_ratings",
                "Numeric ratings of dialogs and answers (their sum and count), by experiment arm",
                ["arm"],
                registry=r,
            )
            for arm in (*sorted(self._arms), NO_ARM):  # every arm shows, at zero too
                self.arm_turns.labels(arm)
                self.arm_fallbacks.labels(arm)
                self.arm_turn_seconds.labels(arm)
                self.arm_ratings.labels(arm)
        #: Exact counts and recent quantiles per service, for the ``/pipeline`` page.
        self.services = ServiceStats()
        self._call_children: dict[tuple[str, str], Histogram] = {}
        self._skill_children: dict[str, tuple[Counter, Counter]] = {}

    def observe_turn(self, result: FinishedTurn, seconds: float, *, arm: str | None = None) -> None:
        """A finished turn; ``arm``: its dialog's experiment arm."""
        self.turns.inc()
        self.turn_seconds.observe(seconds)
        fallback = result.bot_utterance.active_skill == FALLBACK_SKILL
        if self.arm_turns is not None:
            label = self.arm_label(arm)
            self.arm_turns.labels(label).inc()
            self.arm_turn_seconds.labels(label).observe(seconds)
            if fallback:
                self.arm_fallbacks.labels(label).inc()
        self.services.observe(result.utterance.trace)
        for call in result.utterance.trace:
            if call.outcome != "skipped":
                service = self._label(call.service)
                self._call_seconds(service, call.role).observe(call.duration)
                if call.role == "skills":
                    called, spent = self._skill_counters(service)
                    called.inc()
                    spent.inc(call.duration)
                    if call.outcome == "dropped":
                        self.skill_dropped.labels(service).inc()
        for hypothesis in result.utterance.hypotheses:
            used = hypothesis.tokens_used()
            if used:
                self.skill_tokens.labels(self._label(hypothesis.skill_name)).inc(used)
        for error in result.utterance.errors:
            service = self._label(error.service)
            self.errors.labels(service, error.kind).inc()
            if error.kind == "timeout":
                self.timeouts.labels(service).inc()
        if fallback:
            self.fallbacks.inc()

    def observe_rating(self, rating: float, arm: str | None) -> None:
        """A numeric rating of a dialog or of one of its answers, on the dialog's arm
        (nothing without an experiment: the store keeps every rating anyway)."""
        if self.arm_turns is not None:
            self.arm_ratings.labels(self.arm_label(arm)).observe(rating)

    @property
    def experimenting(self) -> bool:
        """Whether an experiment's arms are counted (a rating's arm is worth reading)."""
        return self.arm_turns is not None

    def arm_counts(self) -> dict[str, tuple[int, int]]:
        """(turns, fallbacks) by configured arm, in this process (empty: no experiment)."""
        if self.arm_turns is None:
            return {}

        def value(name: str, arm: str) -> int:
            return int(self.registry.get_sample_value(name, {"arm": arm}) or 0)

        return {
            arm: (
                value("chorus_arm_turns_total", arm),
                value("chorus_arm_fallback_answers_total", arm),
            )
            for arm in self._arms
        }

    def arm_label(self, arm: str | None) -> str:
        return arm if arm is not None and arm in self._arms else NO_ARM

    def observe_sweep(self, swept: Swept) -> None:
        """What one pass of the data lifecycle's sweep did, by rule."""
        for rule, record, count in (
            ("closed_dialogs", "dialogs_deleted", swept.dialogs_deleted),
            ("closed_dialogs", "utterances_deleted", swept.utterances_deleted),
            ("idle_dialogs", "dialogs_closed", swept.dialogs_closed),
            ("compact_turns", "utterances_compacted", swept.utterances_compacted),
        ):
            self.lifecycle.labels(rule, record).inc(count)

    def observe_sizes(self, sizes: dict[str, int]) -> None:
        for collection, count in sizes.items():
            self.store_records.labels(collection).set(count)

    def _label(self, service: str) -> str:
        return service if service in self._services else UNKNOWN_SERVICE

    def _call_seconds(self, service: str, role: str) -> Histogram:
        """The call-time histogram of one service and role, looked up once: a metric's
        ``labels`` checks and joins its values on every call, and a turn makes a dozen."""
        child = self._call_children.get((service, role))
        if child is None:
            child = self._call_children[service, role] = self.call_seconds.labels(service, role)
        return child

    def _skill_counters(self, skill: str) -> tuple[Counter, Counter]:
        """A skill's calls and seconds counters, looked up once (:meth:`_call_seconds`)."""
        children = self._skill_children.get(skill)
        if children is None:
            children = self._skill_children[skill] = (
                self.skill_calls.labels(skill),
                self.skill_seconds.labels(skill),
            )
        return children

    def render(self) -> bytes:
        return generate_latest(self.registry)
