"""``GET /api/pipeline``: the configured service graph and each service's live numbers.

What the ``/pipeline`` page draws and polls; the pipeline describes itself
(:mod:`agent.pipeline.info`), whichever kind it is. Debug data (service URLs, error rates):
it needs the reader's API key like the dialogs.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import Field

from agent.api.deps import ComponentsDep, MetricsDep, PipelineDep
from agent.api.security import ReaderKey
from agent.turn.arms import ExperimentInfo, describe_experiment
from agent.turn.info import PipelineInfo

router = APIRouter(prefix="/api", tags=["pipeline"], dependencies=[ReaderKey])


class PipelineWithArms(PipelineInfo):
    """The pipeline, and the experiment whose first arm it is."""

    experiment: ExperimentInfo | None = Field(
        default=None, description="the arms (CHORUS_EXPERIMENT); null: no experiment runs"
    )


@router.get("/pipeline", response_model=PipelineWithArms)
async def get_pipeline(
    pipeline: PipelineDep, metrics: MetricsDep, components: ComponentsDep
) -> PipelineWithArms:
    """The service graph as configured, with each service's calls, p50/p95 latency,
    error rate and timeouts in this agent process; with an experiment, its arms, their
    shares of new dialogs and their turns in this process (the graph is the first arm's)."""
    info = pipeline.describe(metrics.services)
    experiment = components.experiment
    return PipelineWithArms(
        **dict(info),
        experiment=describe_experiment(experiment, metrics.arm_counts()) if experiment else None,
    )
