"""The spans of a turn, and the ids every log line of the turn carries.

:class:`Telemetry` opens a :class:`TurnScope` per turn and keeps it in a context variable.
This one stays ambient, unlike the turn's events (which the flow hands down in the
:class:`~agent.turn.value.Turn`, :mod:`agent.telemetry.turn_events`), because its main
readers cannot be handed it:

* the log formatter (:class:`~agent.telemetry.logs.JsonFormatter`) stamps the turn's ids on
  every line logged during the turn, by any module or library, and :mod:`logging` gives
  it a record and nothing else;
* a service call's ``traceparent`` (:func:`outgoing_headers`) is added by the connectors,
  below the executor, and each of their ``call`` signatures would carry the turn for it;
* its span is OpenTelemetry's current span, itself held in OpenTelemetry's context
  variable: the scope sets and resets alongside it, in the same task and its children.

The executor's spans (:func:`service_call_span`) and the flow's stamps
(:func:`turn_identified`, :func:`turn_answered`) read the same variable rather than take
the scope as one more argument of the turn, since the variable is there anyway. With
tracing and JSON logs both off no scope is made, and every hook here returns after one
context-variable read.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from agent.state.models import HumanUtterance

UserIds = Literal["hash", "omit"]

_NULL: AbstractContextManager[None] = nullcontext()
#: What :func:`service_call_span` returns while no tracer is set: a caller may skip
#: entering it (every service call of a turn asks).
NO_SPAN = _NULL


@dataclass(slots=True)
class TurnScope:
    """One turn in flight: the ids of its log lines, and its span (None when not tracing;
    a non-recording one when the sampler left this trace out). ``tracer`` is None unless
    the turn is recorded, so an unsampled turn makes no child spans at all."""

    tracer: Tracer | None
    span: Span | None
    dialog_id: str | None = None
    utt_id: str | None = None
    _minted: str | None = None

    @property
    def trace_id(self) -> str:
        """The turn's trace id; without tracing, one made up for the turn, so its log lines
        can still be found together."""
        if self.span is not None and self.span.get_span_context().is_valid:
            return trace.format_trace_id(self.span.get_span_context().trace_id)
        if self._minted is None:
            self._minted = secrets.token_hex(16)
        return self._minted


_scope: ContextVar[TurnScope | None] = ContextVar("chorus_turn", default=None)


def current_turn() -> TurnScope | None:
    """The turn the calling code runs in, if any."""
    return _scope.get()


def user_id_hash(key: bytes, user_id: str) -> str:
    """What a turn's span says of its user: the first 16 hex digits of the id's
    HMAC-SHA256 under ``key``. Keyed, because many user ids are guessable (a Telegram id is
    a number, an e-mail address has a known shape): a plain hash of one is recovered by
    hashing every candidate, a keyed one not without the key."""
    return hmac.new(key, user_id.encode(), hashlib.sha256).hexdigest()[:16]


class Telemetry:
    """What a turn records beyond the store: spans (when ``provider`` is given) and the log
    context (when ``json_logs``). ``user_ids`` says whether spans carry a keyed hash of the
    user id (:func:`user_id_hash`) or nothing of it; the raw id never leaves the agent in a
    span. ``user_id_key`` is ``CHORUS_TRACE_ID_KEY``; without one a random key is made for
    this process, so one user's turns still share a hash within it (but not across
    replicas or restarts, and nobody can compute it from an id)."""

    def __init__(
        self,
        provider: TracerProvider | None = None,
        *,
        json_logs: bool = False,
        user_ids: UserIds = "hash",
        user_id_key: bytes | None = None,
    ) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("chorus.agent") if provider is not None else None
        self._json_logs = json_logs
        self._user_ids = user_ids
        self._user_id_key = user_id_key or secrets.token_bytes(32)

    @property
    def active(self) -> bool:
        return self.tracer is not None or self._json_logs

    def turn(self, user_id: str) -> AbstractContextManager[TurnScope | None]:
        """The scope of one turn: ``with telemetry.turn(user_id) as scope: ...``."""
        if not self.active:
            return _NULL
        return self._turn(user_id)

    @contextmanager
    def _turn(self, user_id: str) -> Iterator[TurnScope]:
        request = trace.get_current_span()
        if self.tracer is None or (
            request.get_span_context().is_valid and not request.is_recording()
        ):
            # Not tracing, or the sampler left this request out: ids for the logs only.
            scope = TurnScope(None, request if self.tracer is not None else None)
            token = _scope.set(scope)
            try:
                yield scope
            finally:
                _scope.reset(token)
            return
        attributes = {}
        if self._user_ids == "hash":
            attributes["chorus.user_id_hash"] = user_id_hash(self._user_id_key, user_id)
        with self.tracer.start_as_current_span("chorus.turn", attributes=attributes) as span:
            scope = TurnScope(self.tracer if span.is_recording() else None, span)
            token = _scope.set(scope)
            try:
                yield scope
            except BaseException as exc:
                span.set_attribute("chorus.outcome", "error")
                span.set_attribute("error.type", type(exc).__name__)
                raise
            finally:
                _scope.reset(token)

    def shutdown(self) -> None:
        """Send the spans still buffered (at the agent's shutdown)."""
        if self.provider is not None:
            self.provider.shutdown()


def turn_identified(dialog_id: str, utt_id: str) -> None:
    """The turn now has its dialog and utterance: stamp them on its span and log lines."""
    scope = _scope.get()
    if scope is None:
        return
    scope.dialog_id, scope.utt_id = dialog_id, utt_id
    if scope.span is not None:
        scope.span.set_attribute("chorus.dialog_id", dialog_id)
        scope.span.set_attribute("chorus.utt_id", utt_id)


def turn_answered(bot_utt_id: str, active_skill: str | None, outcome: str, errors: int) -> None:
    """How the turn ended: the answer's id (the ``utt_id`` the client got), the skill that
    gave it, ``answered`` or ``fallback``, and how many services failed."""
    scope = _scope.get()
    if scope is None or scope.span is None:
        return
    scope.span.set_attribute("chorus.bot_utt_id", bot_utt_id)
    if active_skill is not None:
        scope.span.set_attribute("chorus.active_skill", active_skill)
    scope.span.set_attribute("chorus.outcome", outcome)
    scope.span.set_attribute("chorus.service_errors", errors)


def service_call_span(
    service: str, role: str, utterance: HumanUtterance, dream_group: str | None = None
) -> AbstractContextManager[None]:
    """A child span of the turn around one service call. Its attributes are read from what
    the executor recorded for the call (the :class:`ServiceCall` and any
    :class:`ServiceFailure`), so the span and the stored trace always agree."""
    scope = _scope.get()
    if scope is None or scope.tracer is None:
        return _NULL
    attributes = {"chorus.service": service, "chorus.role": role}
    if dream_group is not None:
        attributes["chorus.dream_group"] = dream_group
    return _service_call(scope.tracer, service, attributes, utterance)


@contextmanager
def _service_call(
    tracer: Tracer, service: str, attributes: dict[str, str], utterance: HumanUtterance
) -> Iterator[None]:
    with tracer.start_as_current_span(
        f"call {service}",
        kind=SpanKind.CLIENT,
        record_exception=False,
        set_status_on_exception=False,
        attributes=attributes,
    ) as span:
        try:
            yield
        except BaseException:  # the turn's deadline cancelled the call
            span.set_attribute("chorus.outcome", "timeout")
            span.set_attribute("error.type", "timeout")
            span.set_status(Status(StatusCode.ERROR, "turn deadline reached"))
            raise
        call = next((c for c in reversed(utterance.trace) if c.service == service), None)
        if call is not None:
            span.set_attribute("chorus.outcome", call.outcome)
            span.set_attribute("chorus.batch_size", call.batch_size)
        failure = next((f for f in reversed(utterance.errors) if f.service == service), None)
        if failure is not None:
            span.set_attribute("error.type", failure.kind)
            span.set_status(Status(StatusCode.ERROR, failure.message[:200]))


def outgoing_headers(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` plus the current span's ``traceparent`` when tracing is on (the same
    dict, untouched, otherwise), for every request to a service."""
    scope = _scope.get()
    if scope is None or scope.span is None:
        return headers
    carrier = dict(headers)  # an unsampled trace is sent on too, so services leave it out
    propagate.inject(carrier)
    return carrier
