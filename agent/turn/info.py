"""What ``GET /api/pipeline`` shows of a pipeline of either kind: its service graph laid
out for the ``/pipeline`` page (a column and a row per service), each service's live
numbers, and the graph's Mermaid source. Each kind lays its own graph out
(:mod:`agent.pipeline.info` by roles, :mod:`agent.dream.info` by dependency depth) into
these shapes.
"""

from __future__ import annotations

from itertools import pairwise

from pydantic import BaseModel, Field

from agent.metrics.services import ServiceSummary


class ServiceInfo(BaseModel):
    """One configured service, where the page draws it."""

    name: str
    role: str = Field(
        description="what the service is (annotators, skills...); a dp-agent service's as "
        "its group and tags tell, else services"
    )
    dream_group: str | None = Field(
        default=None, description="a dp-agent service's group in the pipeline file"
    )
    target: str = Field(
        description="the URL called (without credentials), module:PATH for a service "
        "called in the agent's process, or builtin:NAME"
    )
    timeout: float = Field(description="seconds one call may take")
    batch_size: int
    context_window: int
    previous_services: list[str] = Field(
        description="services it waits for by config (groups expanded); earlier stages are implied"
    )
    required_previous_services: list[str]
    tags: list[str]
    column: int
    row: int


class Stage(BaseModel):
    """A column range of the graph: a Chorus pipeline's non-empty role, in turn order; a
    dp-agent pipeline's dependency depth, named by the role most of its services play."""

    role: str
    services: list[str]
    first_column: int
    last_column: int


class Edge(BaseModel):
    """``source`` must finish before ``target``; ``required``: or ``target`` is skipped."""

    source: str
    target: str
    required: bool


class DisabledInfo(BaseModel):
    """A service the pipeline file lists but the agent does not call now."""

    name: str
    role: str
    dream_group: str | None = None
    reason: str = Field(description='e.g. "requires_env: LLM_BASE_URL not set"')


class PipelineInfo(BaseModel):
    stages: list[Stage]
    services: list[ServiceInfo]
    disabled: list[DisabledInfo] = Field(
        default_factory=list, description="listed in the file, off now (is_enabled, requires_env)"
    )
    edges: list[Edge]
    mermaid: str = Field(description="the graph as a Mermaid flowchart")
    turn_timeout: float | None = Field(description="null: no deadline for the whole turn")
    turns: int = Field(description="turns answered by this agent process")
    stats: dict[str, ServiceSummary] = Field(
        description="by service name; this agent process's calls since it started"
    )


def mermaid(stages: list[Stage], edges: list[Edge], ids: dict[str, str]) -> str:
    """A flowchart: a subgraph per stage, an arrow from stage to stage, and the
    configured waits (dotted; thick when required). Nodes get neutral ids (``s0``...)
    so no service name can collide with Mermaid's keywords."""
    lines = ["flowchart LR"]
    for stage in stages:
        lines.append(f"    subgraph {stage.role} [{stage.role}]")
        lines.extend(f'        {ids[name]}["{name}"]' for name in stage.services)
        lines.append("    end")
    lines.extend(f"    {a.role} --> {b.role}" for a, b in pairwise(stages))
    lines.extend(
        f"    {ids[e.source]} {'==>' if e.required else '-.->'} {ids[e.target]}" for e in edges
    )
    return "\n".join(lines) + "\n"
