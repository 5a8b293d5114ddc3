"""What both executors do around one service call: skip it, contain its failure, trace it.

Chorus's executor and the Dream executor differ in how a turn moves through the graph, but
a single call ends the same way in both: it is skipped (and maybe that is a failure), or it
fails (a :class:`ServiceError`, a timeout, or a bug in the agent's own code for it, such as
a built-in or a formatter) and costs only that service's output, or it succeeds. Each end
is written to the human utterance's ``trace`` and ``errors``, which is all that metrics,
the inspector and the tests read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from agent.connectors.errors import ServiceError
from agent.state.models import FailureKind, HumanUtterance, Outcome, ServiceCall, ServiceFailure
from agent.telemetry import printable
from agent.telemetry.turn_events import TurnListener

log = logging.getLogger("chorus.executor")


@dataclass(frozen=True, slots=True)
class Skip:
    """Why a service does not run this turn; ``failure``: it is recorded as an error too
    (a service it requires gave no output), not only left out of the trace."""

    reason: str
    failure: bool = False


@dataclass(slots=True)
class CallEnd:
    """How a call ended, filled in by :func:`contained`: ``failure`` is None on success."""

    batch: int = 1
    failure: ServiceFailure | None = None

    @property
    def outcome(self) -> Outcome:
        if self.failure is None:
            return "ok"
        return "timeout" if self.failure.kind == "timeout" else "error"


def log_agent_failure(service: str, exc: BaseException | None = None) -> None:
    """Log a bug in the agent's own code for ``service`` (a built-in, a dp-agent formatter
    or python connector) with its traceback: ``exc``, else the exception being handled.
    The turn records only its message, which is no help in finding the bug; both pipeline
    kinds log it here, so it reads the same whichever runs."""
    log.error("service %s failed in the agent", service, exc_info=exc or True)


class contained:
    """Run the block as the call of ``service``; whatever it raises short of a cancellation
    becomes the call's failure (the :class:`CallEnd` entered) instead of the turn's. A
    class rather than a ``contextmanager``: both executors enter one per service call, and
    a generator's context manager costs several times a class's (docs/performance.md,
    "Half the CPU"). ``timeout_message`` may be a function making it, called only when the
    call ran out of time."""

    __slots__ = ("_end", "_service", "_timeout_message")

    def __init__(self, service: str, timeout_message: str | Callable[[], str]) -> None:
        self._service = service
        self._timeout_message = timeout_message
        self._end = CallEnd()

    def __enter__(self) -> CallEnd:
        return self._end

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace: TracebackType | None,
    ) -> bool:
        if exc is None or not isinstance(exc, Exception):  # a cancellation goes on up
            return False
        self._end.failure = failure_of(self._service, exc, self._timeout_message)
        return True


def failure_of(
    service: str, exc: Exception, timeout_message: str | Callable[[], str]
) -> ServiceFailure:
    """What a call of ``service`` that raised ``exc`` (short of a cancellation) failed
    with, as :class:`contained` records it; the executor's step catches its call's
    exception itself and asks here (a ``with`` block a call is three calls of its own)."""
    if isinstance(exc, TimeoutError):
        return ServiceFailure(
            service=service,
            kind="timeout",
            message=timeout_message if isinstance(timeout_message, str) else timeout_message(),
        )
    if isinstance(exc, ServiceError):
        return ServiceFailure(service=service, kind=exc.kind, message=exc.message)
    # a bug in a built-in or formatter must not cost the turn
    log_agent_failure(service, exc)
    return ServiceFailure(
        service=service, kind=ServiceError.kind, message=f"{type(exc).__name__}: {exc}"
    )


class TurnTrace:
    """The utterance's trace and errors, written as the turn's calls end.

    Each call is recorded with its service's ``role`` (what it is: ``annotators``,
    ``skills``...; a dp-agent service's is told by its group and tags) and, for a dp-agent
    pipeline, ``dream_group``: the group the pipeline file files it under, which is a name
    only (it need not be a role)."""

    def __init__(
        self, utterance: HumanUtterance, clock: Callable[[], float], events: TurnListener
    ) -> None:
        self.utterance = utterance
        self.events = events
        self.clock = clock
        self.started = clock()

    def record(
        self,
        service: str,
        role: str,
        start: float,
        outcome: Outcome,
        batch: int = 1,
        *,
        dream_group: str | None = None,
    ) -> None:
        self.utterance.trace.append(
            ServiceCall.made(
                service,
                role,
                dream_group,
                float(start - self.started),
                float(self.clock() - start),
                outcome,
                batch,
            )
        )
        if self.events.listened:  # (a turn nobody follows makes no event's data)
            where = {"dream_group": dream_group} if dream_group is not None else {}
            self.events.emit("progress", service=service, role=role, **where, outcome=outcome)

    def fail(self, service: str, role: str, cause: FailureKind, message: str) -> None:
        self.add_failure(role, ServiceFailure(service=service, kind=cause, message=message))

    def add_failure(self, role: str, failure: ServiceFailure) -> None:
        # The message quotes the service (its error body, its exception): kept on one line.
        log.warning(
            "service %s (%s): %s: %s",
            printable(failure.service),
            role,
            failure.kind,
            printable(failure.message),
        )
        self.utterance.errors.append(failure)

    def skipped(
        self, service: str, role: str, start: float, skip: Skip, *, dream_group: str | None = None
    ) -> None:
        if skip.failure:
            self.fail(service, role, "skipped", skip.reason)
        self.record(service, role, start, "skipped", dream_group=dream_group)

    def ended(
        self, service: str, role: str, start: float, end: CallEnd, *, dream_group: str | None = None
    ) -> None:
        if end.failure is not None:
            self.add_failure(role, end.failure)
        self.record(service, role, start, end.outcome, end.batch, dream_group=dream_group)
