"""Tracing for the agent and every service built with the SDK: OpenTelemetry, off by default.

It lives in the SDK so a service image (which holds only ``agent/sdk/``) can continue the
agent's traces; the agent's own turn, call and store spans are in :mod:`agent.telemetry`.
It needs OpenTelemetry, which the ``chorus-sdk`` wheel installs only with its ``tracing``
extra: a service imports this module only once the environment asks for traces
(:mod:`agent.sdk.tracing_env`, which reads the variables below without it).

**Which spans go where** comes from the standard ``OTEL_*`` environment variables.

The OpenTelemetry specification makes ``otlp`` the default exporter, which would send spans
to ``localhost:4318`` from every agent that never asked for tracing; here tracing is off
until the environment names an exporter or an OTLP endpoint:

- ``OTEL_TRACES_EXPORTER``: ``otlp`` (OTLP over HTTP/protobuf), ``console`` (stdout), or
  ``none``; a comma-separated list sends spans to each.
- ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` alone imply
  ``otlp``. ``OTEL_SDK_DISABLED=true`` turns everything off.

Everything else is read by the SDK itself, as documented upstream: ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER(_ARG)``, ``OTEL_BSP_*`` (batching),
``OTEL_EXPORTER_OTLP_*`` (headers, timeout, compression) and ``OTEL_PROPAGATORS``.

**A server span per HTTP request** (:class:`TraceRequests`) continues the caller's W3C
``traceparent``; it is added to an app only when tracing is on. A hand-written ASGI
middleware rather than ``opentelemetry-instrumentation-asgi``: that one makes three spans
per request (the request and each send and receive), a cost every turn would pay for
nothing an operator reads.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from opentelemetry import propagate
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent.sdk.tracing_env import TelemetryConfigError, exporter_names

__all__ = ["TelemetryConfigError", "TraceRequests", "exporter_names", "tracer_provider_from_env"]

_PROTOCOLS = ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    if name in ("otlp", "otlp_proto_http"):
        for variable in _PROTOCOLS:
            protocol = environ.get(variable, "http/protobuf")
            if protocol != "http/protobuf":
                raise TelemetryConfigError(
                    f"{variable}={protocol}: Chorus exports OTLP over HTTP only; set it to "
                    "http/protobuf (collectors listen for it on port 4318)"
                )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    raise TelemetryConfigError(f"OTEL_TRACES_EXPORTER={name}: use otlp, console or none")


def tracer_provider_from_env(
    default_service_name: str, environ: Mapping[str, str] | None = None
) -> TracerProvider | None:
    """A provider exporting in the background as the environment says, or None when tracing
    is off. ``default_service_name`` names the process unless ``OTEL_SERVICE_NAME`` (or
    ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES``) does."""
    environ = os.environ if environ is None else environ
    names = exporter_names(environ)
    if not names:
        return None
    exporters = [_exporter(name, environ) for name in dict.fromkeys(names)]
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: default_service_name}))
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


#: Probes and scrapes: polled every few seconds, no use in a trace.
UNTRACED_PATHS = frozenset({"/ping", "/ready", "/health", "/metrics"})
_PROPAGATED = (b"traceparent", b"tracestate", b"baggage")


class TraceRequests:
    """Wraps an ASGI app; each HTTP request but probes becomes a ``SERVER`` span."""

    def __init__(
        self, app: ASGIApp, tracer: Tracer, untraced: Collection[str] = UNTRACED_PATHS
    ) -> None:
        self.app = app
        self.tracer = tracer
        self.untraced = frozenset(untraced)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.untraced:
            await self.app(scope, receive, send)
            return
        carrier = {
            key.decode("latin-1"): value.decode("latin-1")
            for key, value in scope["headers"]
            if key in _PROPAGATED
        }
        method = scope["method"]
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with self.tracer.start_as_current_span(
            f"{method} {scope['path']}",
            context=propagate.extract(carrier),
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": scope["path"]},
        ) as span:
            try:
                await self.app(scope, receive, send_and_note)
            finally:
                route = getattr(scope.get("route"), "path", None)
                if route:
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR, f"HTTP {status}"))
