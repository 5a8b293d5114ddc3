"""A local OTLP/HTTP trace receiver: what a collector does with spans, minus the storage.

``python -m bench.otlp_sink --port 4318 [--dump spans.jsonl]`` accepts
``POST /v1/traces`` (protobuf, as the agent's exporter sends it), answers as a collector
does, counts the spans and optionally writes each one as a JSON line. bench/profile.py runs
it so the agent's CPU with tracing on includes encoding and sending every span.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import uvicorn
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

_OK = ExportTraceServiceResponse().SerializeToString()


def spans_of(request: ExportTraceServiceRequest) -> list[dict[str, Any]]:
    """Every span, flattened, with its resource's service.name."""
    found = []
    for resource in MessageToDict(request).get("resourceSpans", []):
        service = next(
            (
                a["value"].get("stringValue")
                for a in resource["resource"].get("attributes", [])
                if a["key"] == "service.name"
            ),
            None,
        )
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                found.append({"service.name": service, **span})
    return found


def make_app(dump: Path | None) -> Starlette:
    count = {"spans": 0, "requests": 0}

    async def traces(request: Request) -> Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.body())
        count["requests"] += 1
        if dump is None:
            count["spans"] += sum(
                len(s.spans) for r in message.resource_spans for s in r.scope_spans
            )
        else:
            spans = spans_of(message)
            count["spans"] += len(spans)
            with dump.open("a") as out:
                out.writelines(json.dumps(span) + "\n" for span in spans)
        return Response(_OK, media_type="application/x-protobuf")

    async def stats(_: Request) -> Response:
        return JSONResponse(count)

    return Starlette(routes=[Route("/v1/traces", traces, methods=["POST"]), Route("/stats", stats)])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=4318)
    parser.add_argument("--dump", type=Path, default=None, help="write each span as JSON")
    args = parser.parse_args()
    uvicorn.run(
        make_app(args.dump), host="127.0.0.1", port=args.port, log_level="warning", access_log=False
    )


if __name__ == "__main__":
    main()
