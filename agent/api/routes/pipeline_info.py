"""``GET /api/pipeline``: the configured service graph and each service's live numbers.

What the ``/pipeline`` page draws and polls; the pipeline describes itself
(:mod:`agent.pipeline.info`), whichever kind it is. Debug data (service URLs, error rates):
it needs the reader's API key like the dialogs.
"""

from __future__ import annotations

from fastapi import APIRouter

from agent.api.deps import MetricsDep, PipelineDep
from agent.api.security import ReaderKey
from agent.pipeline.info import PipelineInfo

router = APIRouter(prefix="/api", tags=["pipeline"], dependencies=[ReaderKey])


@router.get("/pipeline", response_model=PipelineInfo)
async def get_pipeline(pipeline: PipelineDep, metrics: MetricsDep) -> PipelineInfo:
    """The service graph as configured, with each service's calls, p50/p95 latency,
    error rate and timeouts in this agent process."""
    return pipeline.describe(metrics.services)
