"""What ``GET /api/pipeline`` shows of a pipeline: its service graph laid out for the
``/pipeline`` page, and each service's live numbers.

The graph comes with a layout (a column and a row per service: stages left to right, a
service after those of its own stage it waits for) so the page only has to draw boxes, and
with its Mermaid source for documents. Each kind of pipeline describes itself
(:meth:`agent.turn.base.LoadedPipeline.describe`): a Chorus pipeline here, by its
roles (:func:`describe`), a dp-agent one by dependency depth (:mod:`agent.dream.info`).
"""

from __future__ import annotations

from agent.metrics.services import ServiceStats
from agent.pipeline.config import ServiceConfig
from agent.pipeline.graph import Pipeline, ServiceNode
from agent.sdk.roles import ROLES
from agent.turn.info import DisabledInfo, Edge, PipelineInfo, ServiceInfo, Stage, mermaid


def _target(config: ServiceConfig) -> str:
    url = config.connector.url
    if config.connector.module is not None:
        return f"module:{config.connector.module}"
    if url is None:
        return f"builtin:{config.connector.builtin}"
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}{url.path or ''}"


def _expand(names: list[str], pipeline: Pipeline) -> list[str]:
    """Service names, with a role's name standing for its enabled services."""
    found: list[str] = []
    for name in names:
        role = next((r for r in ROLES if r == name), None)
        members = [n.name for n in pipeline.services_of(role)] if role else [name]
        found.extend(m for m in members if m not in found)
    return found


def _edges(pipeline: Pipeline) -> list[Edge]:
    edges: dict[tuple[str, str], Edge] = {}
    for node in pipeline:
        for source in _expand(node.config.previous_services, pipeline):
            edges[source, node.name] = Edge(source=source, target=node.name, required=False)
        for source in _expand(node.config.required_previous_services, pipeline):
            edges[source, node.name] = Edge(source=source, target=node.name, required=True)
    return list(edges.values())


def _layout(pipeline: Pipeline, edges: list[Edge]) -> tuple[list[Stage], dict[str, int]]:
    """Columns: one stage after another; within a stage, a service goes one column right
    of the latest service of the same stage it waits for (the nodes are in dependency
    order, so those are placed already)."""
    waits_for: dict[str, list[str]] = {}
    for edge in edges:
        waits_for.setdefault(edge.target, []).append(edge.source)
    role_of = {node.name: node.role for node in pipeline}
    stages: list[Stage] = []
    column: dict[str, int] = {}
    next_column = 0
    for role in ROLES:
        nodes = pipeline.services_of(role)
        if not nodes:
            continue
        for node in nodes:
            same_stage = [column[s] for s in waits_for.get(node.name, []) if role_of[s] == role]
            column[node.name] = max(same_stage, default=next_column - 1) + 1
        last = max(column[n.name] for n in nodes)
        stages.append(
            Stage(
                role=role,
                services=[n.name for n in nodes],
                first_column=next_column,
                last_column=last,
            )
        )
        next_column = last + 1
    return stages, column


def _service(node: ServiceNode, column: int, row: int, pipeline: Pipeline) -> ServiceInfo:
    config = node.config
    return ServiceInfo(
        name=node.name,
        role=node.role,
        target=_target(config),
        timeout=config.connector.timeout,
        batch_size=config.connector.batch_size,
        context_window=config.context_window,
        previous_services=_expand(config.previous_services, pipeline),
        required_previous_services=_expand(config.required_previous_services, pipeline),
        tags=config.tags,
        column=column,
        row=row,
    )


def describe(pipeline: Pipeline, stats: ServiceStats) -> PipelineInfo:
    """The page's whole payload."""
    edges = _edges(pipeline)
    stages, columns = _layout(pipeline, edges)
    nodes = {node.name: node for node in pipeline}
    rows: dict[int, int] = {}
    services = []
    for stage in stages:
        for name in stage.services:
            row = rows[columns[name]] = rows.get(columns[name], -1) + 1
            services.append(_service(nodes[name], columns[name], row, pipeline))
    ids = {service.name: f"s{i}" for i, service in enumerate(services)}
    return PipelineInfo(
        stages=stages,
        services=services,
        disabled=[
            DisabledInfo(name=d.name, role=d.role, reason=d.reason) for d in pipeline.disabled
        ],
        edges=edges,
        mermaid=mermaid(stages, edges, ids),
        turn_timeout=pipeline.turn_timeout,
        turns=stats.turns,
        stats=stats.summary(s.name for s in services),
    )
