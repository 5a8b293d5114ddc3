"""Traces and structured logs, what an operator's own tools read about a turn, and the turn
events a client following a turn is told (:mod:`agent.telemetry.turn_events`).

Tracing is OpenTelemetry, off unless the standard ``OTEL_*`` environment variables ask for
it (:func:`agent.sdk.tracing.tracer_provider_from_env`); off, a turn pays one boolean check
per hook. On, a turn is one span, each service call a child span whose context travels to
the service as a W3C ``traceparent`` header, and each store operation a span
(docs/observability.md).

This package is in the infrastructure layer (tests/test_layers.py): the API, the message
flow, the pipeline and the connectors call into it, and it calls only the layers below
(the store's protocol, the state's models and the SDK's tracing set-up).
"""

from agent.sdk.tracing import TelemetryConfigError, TraceRequests, tracer_provider_from_env
from agent.telemetry.logs import configure_logging, printable, root_logger_kept
from agent.telemetry.store import traced_store
from agent.telemetry.turns import (
    NO_SPAN,
    Telemetry,
    outgoing_headers,
    service_call_span,
    turn_answered,
    turn_identified,
)

__all__ = [
    "NO_SPAN",
    "Telemetry",
    "TelemetryConfigError",
    "TraceRequests",
    "configure_logging",
    "outgoing_headers",
    "printable",
    "root_logger_kept",
    "service_call_span",
    "traced_store",
    "tracer_provider_from_env",
    "turn_answered",
    "turn_identified",
]
