"""Liveness and readiness, for load balancers, orchestrators and dp-agent clients."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from agent.api.deps import ReadinessDep
from agent.api.readiness import ReadinessReport
from agent.api.security import KeyHeld

router = APIRouter(tags=["health"])


@router.get("/ping")
async def ping() -> str:
    """``"pong"`` while the agent is up (liveness: restart the agent when this fails)."""
    return "pong"


@router.get(
    "/ready",
    response_model=ReadinessReport,
    responses={503: {"model": ReadinessReport, "description": "not ready"}},
)
async def ready(readiness: ReadinessDep, response: Response, key_held: KeyHeld) -> ReadinessReport:
    """200 when the store answers and every required service is reachable, else 503 with
    what is down (readiness: send this agent traffic only while it is 200). Why it is down
    (the database's error, a service's URL) only with the ``X-API-Key`` when
    ``CHORUS_API_KEY`` is set: probes need no key, and learn no more than up or down."""
    report = await readiness.check()
    if not key_held:
        report = report.summary()
    if not report.ready:
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
        response.headers["Retry-After"] = "5"
    return report
