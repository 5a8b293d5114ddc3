"""What ``GET /api/pipeline`` shows of a dp-agent (Dream) pipeline: the same payload as for a
Chorus pipeline (:mod:`agent.pipeline.info`), laid out by dependency depth, since dp-agent
orders services only by ``previous_services`` (its groups are names, not stages).

A stage is one depth: every service in it waits only for services of earlier stages. It is
labelled by the role most of its services play; the last-chance and timeout services make
the last stage, "fallbacks".
"""

from __future__ import annotations

from collections import Counter

from agent.dream.config import HttpConnectorConfig
from agent.dream.graph import DreamPipeline, DreamService
from agent.metrics.services import ServiceStats
from agent.sdk.roles import ROLES
from agent.state.models import SERVICES_ROLE
from agent.turn.info import (
    DisabledInfo,
    Edge,
    PipelineInfo,
    ServiceInfo,
    Stage,
    mermaid,
)


def _target(service: DreamService) -> str:
    config = service.connector
    if isinstance(config, HttpConnectorConfig):
        url = (
            config.url
            if config.url is not None
            else (config.urllist[0] if config.urllist else None)
        )
        if url is not None:
            port = f":{url.port}" if url.port is not None else ""
            return f"{url.scheme}://{url.host}{port}{url.path or ''}"
    return f"python:{getattr(config, 'class_name', '?')}"


def _depths(pipeline: DreamPipeline) -> dict[str, int]:
    depth: dict[str, int] = {}
    for node in pipeline.nodes:  # in dependency order
        depth[node.name] = max((depth[d] + 1 for d in node.depends_on), default=0)
    return depth


def _label(stage: list[DreamService], fallbacks: bool) -> str:
    """The role most of the stage's services play (the page has room for one)."""
    if fallbacks:
        return "fallbacks"
    roles = [n.role for n in stage]
    return Counter(roles).most_common(1)[0][0] if roles else SERVICES_ROLE


def _disabled_role(name: str) -> tuple[str, str | None]:
    """A disabled service is known by its name only (``group.service``): its group is a
    role's name, or nothing says its role."""
    group = name.rpartition(".")[0] or None
    return (group if group in ROLES else SERVICES_ROLE), group


def describe_dream(pipeline: DreamPipeline, stats: ServiceStats) -> PipelineInfo:
    """The page's payload; the last-chance and timeout services close the graph."""
    depth = _depths(pipeline)
    last = max(depth.values(), default=-1) + 1
    extra = [s for s in (pipeline.last_chance, pipeline.timeout) if s is not None]
    for service in extra:
        depth[service.name] = last
    nodes = [*pipeline.nodes, *extra]
    stages: list[Stage] = []
    services: list[ServiceInfo] = []
    for column in range(max(depth.values(), default=-1) + 1):
        here = [n for n in nodes if depth[n.name] == column]
        label = _label(here, fallbacks=column == last and bool(extra))
        stages.append(
            Stage(
                role=label,
                services=[n.name for n in here],
                first_column=column,
                last_column=column,
            )
        )
        for row, node in enumerate(here):
            services.append(
                ServiceInfo(
                    name=node.name,
                    role=node.role,
                    dream_group=node.dream_group,
                    target=_target(node),
                    timeout=pipeline.call_timeout(node),
                    batch_size=getattr(node.connector, "batch_size", 1),
                    context_window=pipeline.history_window,
                    previous_services=sorted(node.depends_on - node.requires),
                    required_previous_services=sorted(node.requires),
                    tags=sorted(node.tags),
                    column=column,
                    row=row,
                )
            )
    edges = [
        Edge(source=dep, target=node.name, required=dep in node.requires)
        for node in pipeline.nodes
        for dep in sorted(node.depends_on)
    ]
    ids = {service.name: f"s{i}" for i, service in enumerate(services)}
    return PipelineInfo(
        stages=stages,
        services=services,
        disabled=[
            DisabledInfo(name=name, role=role, dream_group=group, reason=reason)
            for name, reason in pipeline.disabled.items()
            for role, group in [_disabled_role(name)]
        ],
        edges=edges,
        mermaid=mermaid(stages, edges, ids),
        turn_timeout=pipeline.turn_timeout,
        turns=stats.turns,
        stats=stats.summary(s.name for s in services),
    )
