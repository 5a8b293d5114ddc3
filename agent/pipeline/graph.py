"""The service graph of a pipeline: who waits for whom, checked for sense at start-up.

A service waits for every enabled service of the earlier groups (annotators before skill
selectors before skills ...) and for its own ``previous_services``, which may name a
service or a whole group. Anything that would make a turn stall (an unknown or disabled
dependency, a cycle, two response selectors) is a :class:`PipelineConfigError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from agent.pipeline.config import PipelineConfig, ServiceConfig
from agent.sdk.roles import ROLES, Role
from agent.turn.config import (
    Dialect,
    DoubleTexting,
    HandoffConfig,
    PipelineConfigError,
    topological_order,
)


@dataclass(frozen=True, slots=True)
class ServiceNode:
    """A service as the executor runs it."""

    name: str
    role: Role
    config: ServiceConfig
    depends_on: frozenset[str]
    requires: frozenset[str]


@dataclass(frozen=True, slots=True)
class DisabledService:
    """A service the file lists but the pipeline leaves out now, and why: kept so that
    ``/pipeline`` can show it as off instead of hiding it."""

    name: str
    role: Role
    reason: str


@dataclass(frozen=True, slots=True)
class Pipeline:
    """The validated graph, in an order where every service comes after what it waits for."""

    nodes: tuple[ServiceNode, ...]
    turn_timeout: float
    fallback_response: str
    disabled: tuple[DisabledService, ...] = ()
    double_texting: DoubleTexting = "enqueue"
    #: None: dialogs are never handed to a person
    handoff: HandoffConfig | None = None

    def services_of(self, role: Role) -> list[ServiceNode]:
        return [node for node in self.nodes if node.role == role]

    def __iter__(self) -> Iterator[ServiceNode]:
        return iter(self.nodes)

    @property
    def dialect(self) -> Dialect:
        """Chorus's own file: Chorus's shapes."""
        return "chorus"

    @property
    def history_window(self) -> int:
        """How many past utterances a turn must read: the widest service window."""
        return max((node.config.context_window for node in self.nodes), default=1)

    # -- what the layers above ask of any pipeline (agent.turn.base.PipelineGraph) --

    def service_names(self, *, fallbacks: bool = False) -> list[str]:
        """Every service, in run order (a Chorus pipeline has no fallback services)."""
        return [node.name for node in self.nodes]

    def listed_names(self) -> list[str]:
        """Every service, in run order: a Chorus file has no dp-agent's own to add."""
        return self.service_names()

    def service_urls(self) -> dict[str, str]:
        return {
            node.name: str(node.config.connector.url)
            for node in self.nodes
            if node.config.connector.url is not None
        }

    def required_names(self) -> set[str]:
        return {name for node in self.nodes for name in node.requires}


def _expand(
    names: list[str],
    where: str,
    enabled: dict[str, Role],
    disabled: dict[str, str],
    by_group: dict[Role, list[str]],
) -> set[str]:
    result: set[str] = set()
    for name in names:
        if name in by_group:
            result.update(by_group[name])
        elif name in enabled:
            result.add(name)
        elif name in disabled:
            raise PipelineConfigError(
                f"{where}: depends on {name!r}, which is off ({disabled[name]}); "
                "enable it or remove the dependency"
            )
        else:
            raise PipelineConfigError(
                f"{where}: unknown service {name!r}; known services: "
                f"{', '.join(sorted(enabled)) or 'none'}"
            )
    return result


def build_pipeline(config: PipelineConfig) -> Pipeline:
    """Turn a parsed config into the graph the executor runs, or say what is wrong."""
    enabled: dict[str, Role] = {}
    disabled: dict[str, str] = {}
    off: list[DisabledService] = []
    by_group: dict[Role, list[str]] = {g: [] for g in ROLES}
    for group, services in config.services.items():
        for name, service in services.items():
            reason = service.off_because()
            if reason is None:
                enabled[name] = group
                by_group[group].append(name)
            else:
                disabled[name] = reason
                off.append(DisabledService(name, group, reason))
    if len(by_group["response_selectors"]) > 1:
        raise PipelineConfigError(
            "services.response_selectors: only one response selector may be enabled, found "
            + ", ".join(by_group["response_selectors"])
        )
    for group, services in config.services.items():
        for name, service in services.items():
            tiered = service.tier or service.budget is not None
            if group != "skills" and tiered:
                key = "tier" if service.tier else "budget"
                raise PipelineConfigError(
                    f"services.{group}.{name}.{key}: tiers and token budgets are for skills only"
                )
    for name, group in enabled.items():
        if config.services[group][name].connector.protocol == "parlai" and group != "skills":
            raise PipelineConfigError(
                f'services.{group}.{name}.connector.protocol: "parlai" is for skills only '
                "(an act is turned into hypotheses)"
            )
    deps: dict[str, set[str]] = {}
    required: dict[str, set[str]] = {}
    for name, group in enabled.items():
        service = config.services[group][name]
        where = f"services.{group}.{name}"
        earlier = {n for g in ROLES[: ROLES.index(group)] for n in by_group[g]}
        named = _expand(
            service.previous_services, f"{where}.previous_services", enabled, disabled, by_group
        )
        required[name] = _expand(
            service.required_previous_services,
            f"{where}.required_previous_services",
            enabled,
            disabled,
            by_group,
        )
        deps[name] = (earlier | named | required[name]) - {name}
        if name in named | required[name]:
            raise PipelineConfigError(
                f"{where}.previous_services: a service cannot wait for itself"
            )
    for name, group in enabled.items():
        tier = config.services[group][name].tier
        for dep in sorted(deps[name]) if group == "skills" else []:
            if enabled[dep] == "skills" and config.services["skills"][dep].tier > tier:
                raise PipelineConfigError(
                    f"services.{group}.{name}.previous_services: waits for {dep!r}, a skill "
                    "of a higher tier, which waits for this one's tier: lower its tier"
                )
    order = topological_order(deps, lambda n: f"services.{enabled[n]}.{n}")
    nodes = tuple(
        ServiceNode(
            n,
            enabled[n],
            config.services[enabled[n]][n],
            frozenset(deps[n]),
            frozenset(required[n]),
        )
        for n in order
    )
    return Pipeline(
        nodes,
        config.turn_timeout,
        config.fallback_response,
        tuple(off),
        config.double_texting,
        config.handoff,
    )
