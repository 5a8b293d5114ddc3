"""bench.otlp_sink receives what the OTLP/HTTP exporter sends, as a collector would."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from bench.otlp_sink import make_app
from tests.support.servers import serving


def test_the_sink_decodes_and_counts_exported_spans(tmp_path: Path) -> None:
    dump = tmp_path / "spans.jsonl"
    with serving(make_app(dump)) as sink:
        provider = TracerProvider(resource=Resource({SERVICE_NAME: "probe"}))
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{sink.url}/v1/traces"))
        )
        tracer = provider.get_tracer("test")
        with (
            tracer.start_as_current_span("outer"),
            tracer.start_as_current_span("inner", attributes={"chorus.service": "x"}),
        ):
            pass
        provider.shutdown()
        stats = httpx.get(f"{sink.url}/stats").json()
    assert stats == {"spans": 2, "requests": 2}
    spans = [json.loads(line) for line in dump.read_text().splitlines()]
    assert [s["name"] for s in spans] == ["inner", "outer"]
    assert {s["service.name"] for s in spans} == {"probe"}
    assert spans[0]["attributes"] == [{"key": "chorus.service", "value": {"stringValue": "x"}}]
    assert spans[0]["parentSpanId"] == spans[1]["spanId"]
