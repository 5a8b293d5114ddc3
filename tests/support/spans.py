"""OpenTelemetry's own in-memory exporter, plus a way to wait for spans without sleeping.

Spans end in the server threads (a server span after its response is sent), so a test
waits on a condition the exporter notifies as each span arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class SpanRecorder(InMemorySpanExporter):
    """Keeps every span of one tracer provider; :meth:`wait_for` blocks until enough came."""

    def __init__(self, service_name: str) -> None:
        super().__init__()
        self._arrived = threading.Condition()
        self.provider = TracerProvider(resource=Resource({SERVICE_NAME: service_name}))
        self.provider.add_span_processor(SimpleSpanProcessor(self))

    def export(self, spans: Sequence[ReadableSpan]):  # type: ignore[no-untyped-def]
        result = super().export(spans)
        with self._arrived:
            self._arrived.notify_all()
        return result

    def wait_for(
        self, done: Callable[[list[ReadableSpan]], bool], timeout: float = 10.0
    ) -> list[ReadableSpan]:
        with self._arrived:
            assert self._arrived.wait_for(lambda: done(list(self.get_finished_spans())), timeout), (
                "the expected spans never ended"
            )
        return list(self.get_finished_spans())


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s.name for s in spans]}"
    return found[0]
