"""Tracing is off unless the standard OTEL_* variables ask for it, and says what is wrong."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from agent.sdk.tracing import TelemetryConfigError, tracer_provider_from_env


def exporters(provider: TracerProvider) -> list[type]:
    processors = provider._active_span_processor._span_processors
    return [type(p.span_exporter) for p in processors]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
        {"OTEL_SERVICE_NAME": "x"},
    ],
)
def test_tracing_is_off_unless_an_exporter_or_endpoint_is_named(environ: dict[str, str]) -> None:
    assert tracer_provider_from_env("chorus-agent", environ) is None


def test_an_otlp_endpoint_alone_turns_on_otlp_over_http() -> None:
    provider = tracer_provider_from_env(
        "chorus-agent", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    )
    assert provider is not None
    try:
        assert exporters(provider) == [OTLPSpanExporter]
        assert provider.resource.attributes["service.name"] == "chorus-agent"
    finally:
        provider.shutdown()


def test_exporters_can_be_listed_and_the_service_name_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "agent-eu-1")  # read by the SDK's Resource
    provider = tracer_provider_from_env("chorus-agent", {"OTEL_TRACES_EXPORTER": "console"})
    assert provider is not None
    try:
        assert exporters(provider) == [ConsoleSpanExporter]
        assert provider.resource.attributes["service.name"] == "agent-eu-1"
    finally:
        provider.shutdown()


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER=zipkin: use otlp, console"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: Chorus exports OTLP over HTTP only",
        ),
    ],
)
def test_what_cannot_be_done_is_refused_naming_the_variable(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(TelemetryConfigError, match=message):
        tracer_provider_from_env("chorus-agent", environ)
