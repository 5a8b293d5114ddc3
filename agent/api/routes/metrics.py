"""``GET /metrics``: Prometheus text format; needs the reader's key, when the agent has one,
unless ``CHORUS_METRICS_PUBLIC`` is true (as the load numbers of ``/debug/current_load``)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from agent.api.deps import MetricsDep
from agent.api.security import MetricsKey

router = APIRouter(tags=["observability"])


@router.get("/metrics", response_class=Response, dependencies=[MetricsKey])
async def metrics(metrics: MetricsDep) -> Response:
    """Turns, turn latency, per-service call latency, errors by kind, timeouts, fallback
    answers and turns in flight."""
    return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)
