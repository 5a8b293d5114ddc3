"""``GET /metrics``: Prometheus text format."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

router = APIRouter(tags=["observability"])


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Turns, turn latency, per-service call latency, errors by kind, timeouts, fallback
    answers and turns in flight."""
    return Response(request.app.state.flow.metrics.render(),
                    media_type=CONTENT_TYPE_LATEST)
