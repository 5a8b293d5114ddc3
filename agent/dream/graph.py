"""A dp-agent pipeline as Chorus runs it: services, what each waits for, and its callables.

dp-agent orders services only by ``previous_services`` (a group's name stands for all of its
services); groups are names, not stages. Everything a turn needs is resolved here, at
start-up: formatters and python connector classes are imported by their dotted names from
the Python path, and any name that does not resolve stops the agent with the entry's path.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from agent.dream.config import (
    ConnectorConfig,
    DpConfig,
    FormatterRef,
    HttpConnectorConfig,
    ParsedService,
    parse_dp_config,
)
from agent.sdk.roles import ROLES
from agent.state.models import SERVICES_ROLE
from agent.turn.config import (
    Dialect,
    DoubleTexting,
    HandoffConfig,
    PipelineConfigError,
    topological_order,
)

log = logging.getLogger("chorus.dream")

Formatter = Callable[..., Any]

#: How many stored utterances a turn reads by default: Dream's formatters look back at most
#: ten bot turns (``get_last_n_turns(bot_last_turns=10)``: 21 utterances) and 15 active skills.
DEFAULT_WINDOW = 40
#: No deadline for the whole turn, as dp-agent runs Dream (``response_time_limit: 0``): each
#: service is bounded by its own ``timeout``.
DEFAULT_TURN_TIMEOUT: float | None = None
#: A call's bound when neither its service's ``timeout`` nor a turn deadline gives one (dp-agent
#: would wait for ever): the longest ``timeout`` a service may be given.
LONGEST_CALL = 600.0
DEFAULT_FALLBACK = "Sorry, I don't have an answer for that right now."
#: The role a dp-agent tag tells, for a service whose group is not a role's name; the
#: last-chance and timeout services answer when the graph does not: ``fallbacks``.
TAG_ROLES = (
    ("selector", "skill_selectors"),
    ("responder", "response_selectors"),
    ("last_chance", "fallbacks"),
    ("timeout", "fallbacks"),
)


@dataclass(frozen=True, slots=True)
class DreamService:
    """One service as the Dream executor runs it."""

    name: str
    label: str
    #: dp-agent's group (the pipeline file's key it is under), None at the top level
    dream_group: str | None
    connector: ConnectorConfig
    connector_key: str
    dialog_formatter: Formatter | None
    response_formatter: Formatter | None
    state_manager_method: str | None
    tags: frozenset[str]
    depends_on: frozenset[str]
    requires: frozenset[str]

    @property
    def role(self) -> str:
        """What the service is, as Chorus's roles name it: its group when that is a role's
        name (Dream's own files group services so), else what its tags tell, else
        ``services``. dp-agent's group itself is only a name (:attr:`dream_group`)."""
        if self.dream_group in ROLES:
            return self.dream_group
        return next((role for tag, role in TAG_ROLES if tag in self.tags), SERVICES_ROLE)


@dataclass(frozen=True, slots=True)
class DreamPipeline:
    """The validated graph, each service after what it waits for, and the two fallbacks."""

    nodes: tuple[DreamService, ...]
    last_chance: DreamService | None
    timeout: DreamService | None
    connectors_module: str | None
    history_window: int = DEFAULT_WINDOW
    #: seconds before the timeout service answers; None: the turn has no deadline
    turn_timeout: float | None = DEFAULT_TURN_TIMEOUT
    fallback_response: str = DEFAULT_FALLBACK
    metadata: Any = None
    disabled: dict[str, str] = field(default_factory=dict)
    #: every service's name in the file's order, the disabled ones included, less the last
    #: chance and timeout services (dp-agent keeps those apart)
    file_order: tuple[str, ...] = ()
    #: a dp-agent file has no such setting: a request may still ask for another policy
    double_texting: DoubleTexting = "enqueue"
    #: a dp-agent file has no such setting: its dialogs are never handed to a person
    handoff: HandoffConfig | None = None

    @property
    def dialect(self) -> Dialect:
        """dp-agent's file: its clients read dp-agent's reply and dialog shapes."""
        return "dp-agent"

    def __iter__(self) -> Iterator[DreamService]:
        return iter(self.nodes)

    def call_timeout(self, service: DreamService) -> float:
        """Seconds one call of ``service`` may take: its own ``timeout``, else the turn's
        deadline, else :data:`LONGEST_CALL`."""
        own = getattr(service.connector, "timeout", 0)
        return own or self.turn_timeout or LONGEST_CALL

    def all_services(self) -> list[DreamService]:
        extra = [s for s in (self.last_chance, self.timeout) if s is not None]
        return [*self.nodes, *extra]

    # -- what the layers above ask of any pipeline (agent.turn.base.PipelineGraph) --

    def service_names(self, *, fallbacks: bool = False) -> list[str]:
        services = self.all_services() if fallbacks else self.nodes
        return [service.name for service in services]

    def listed_names(self) -> list[str]:
        """dp-agent's ``attributes.pipeline``: the file's services in its order (dp-agent
        reads no ``is_enabled``, so the disabled ones too), then its own ``input`` and
        ``responder``, which it adds to every pipeline."""
        return [*self.file_order, "input", "responder"]

    def service_urls(self) -> dict[str, str]:
        """An HTTP service's URL (one with several workers: the first)."""
        return {
            node.name: node.connector.urls[0]
            for node in self.nodes
            if isinstance(node.connector, HttpConnectorConfig)
        }

    def required_names(self) -> set[str]:
        return {name for node in self.nodes for name in node.requires}


def import_dotted(ref: str, where: str, default_module: str | None = None) -> Any:
    """``package.module:attribute`` from the Python path, as dp-agent imports them."""
    module_name, sep, attribute = ref.partition(":")
    if not sep:
        if default_module is None:
            raise PipelineConfigError(
                f"{where}: {ref!r} must be written as module:name "
                "(e.g. state_formatters.dp_formatters:full_dialog)"
            )
        module_name, attribute = default_module, ref
    if not module_name or not attribute or ":" in attribute:
        raise PipelineConfigError(f"{where}: {ref!r} must be written as module:name")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # an ImportError, or the module failing as it loads
        raise PipelineConfigError(
            f"{where}: cannot import {module_name!r} ({type(exc).__name__}: {exc}); run the "
            "agent with the module's folder on PYTHONPATH (a Dream checkout's root)"
        ) from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise PipelineConfigError(f"{where}: module {module_name!r} has no {attribute!r}") from None


def _formatter(
    ref: str | FormatterRef | None, where: str, default_module: str | None
) -> Formatter | None:
    if ref is None:
        return None
    if isinstance(ref, str):
        function = import_dotted(ref, where, default_module)
        kwargs: dict[str, Any] = {}
    else:
        function = import_dotted(ref.name, f"{where}.name", default_module)
        kwargs = dict(ref.model_extra or {})
    if not callable(function):
        raise PipelineConfigError(f"{where}: {ref!r} is not a function")
    return partial(function, **kwargs) if kwargs else function


def _resolve(
    names: list[str],
    where: str,
    services: dict[str, ParsedService],
    groups: dict[str, list[str]],
    labels: dict[str, list[str]],
    disabled: set[str],
) -> set[str]:
    """Service names behind ``previous_services`` entries: a group, ``group.service``, a
    top-level service, or a service's own name when only one service has it."""
    result: set[str] = set()
    for name in names:
        if name in groups:
            result.update(n for n in groups[name] if n in services)
        elif name in services:
            result.add(name)
        elif name in disabled:
            log.info("%s: %r is disabled; not waited for", where, name)
        elif len(labels.get(name, [])) == 1:
            result.add(labels[name][0])
        elif name in labels:
            raise PipelineConfigError(
                f"{where}: {name!r} is ambiguous; write one of {', '.join(sorted(labels[name]))}"
            )
        else:
            # dp-agent drops such links with a printed warning, and Dream's own
            # distributions have some (a service removed, its name left behind).
            log.warning("%s: unknown service or group %r is not waited for", where, name)
    return result


def build_dream_pipeline(
    data: object,
    source: str = "pipeline config",
    *,
    window: int = DEFAULT_WINDOW,
    turn_timeout: float | None = DEFAULT_TURN_TIMEOUT,
    fallback_response: str = DEFAULT_FALLBACK,
) -> DreamPipeline:
    """Validate a dp-agent document and resolve everything a turn needs, or say what is
    wrong and where."""
    config, parsed = parse_dp_config(data, source)
    try:
        return _build(config, parsed, window, turn_timeout, fallback_response)
    except PipelineConfigError as exc:
        raise PipelineConfigError(f"{source}: {exc}") from None


def _build(
    config: DpConfig,
    parsed: list[ParsedService],
    window: int,
    turn_timeout: float | None,
    fallback_response: str,
) -> DreamPipeline:
    seen: set[str] = set()
    for service in parsed:
        if service.name in seen:
            raise PipelineConfigError(f"{service.where}: the name is used twice")
        seen.add(service.name)
    enabled = {s.name: s for s in parsed if s.config.is_enabled}
    disabled = {s.name for s in parsed if not s.config.is_enabled}
    special = {n: s for n, s in enabled.items() if {"last_chance", "timeout"} & set(s.config.tags)}
    graph = {n: s for n, s in enabled.items() if n not in special}
    groups: dict[str, list[str]] = {}
    labels: dict[str, list[str]] = {}
    for name, service in graph.items():
        if service.group is not None:
            groups.setdefault(service.group, []).append(name)
        labels.setdefault(service.label, []).append(name)
    for service in parsed:  # a group whose services are all disabled is still a name
        if service.group is not None:
            groups.setdefault(service.group, [])

    def make(service: ParsedService, deps: set[str], requires: set[str]) -> DreamService:
        where, cfg = service.where, service.config
        if isinstance(cfg.connector, str):
            # dp-agent files it as "connectors.NAME"; the bare NAME is accepted too.
            ref = cfg.connector.removeprefix("connectors.")
            if ref not in config.connectors:
                raise PipelineConfigError(
                    f"{where}.connector: no connector {cfg.connector!r} in the top-level "
                    f'"connectors"; known: {", ".join(sorted(config.connectors)) or "none"}'
                )
            connector, key = config.connectors[ref], f"connectors.{ref}"
        else:
            connector, key = cfg.connector, service.name
        return DreamService(
            name=service.name,
            label=service.label,
            dream_group=service.group,
            connector=connector,
            connector_key=key,
            dialog_formatter=_formatter(
                cfg.dialog_formatter, f"{where}.dialog_formatter", config.formatters_module
            ),
            response_formatter=_formatter(
                cfg.response_formatter, f"{where}.response_formatter", config.formatters_module
            ),
            state_manager_method=cfg.state_manager_method,
            tags=frozenset(cfg.tags),
            depends_on=frozenset(deps),
            requires=frozenset(requires),
        )

    deps: dict[str, set[str]] = {}
    required: dict[str, set[str]] = {}
    for name, service in graph.items():
        where = service.where
        named = _resolve(
            service.config.previous_services,
            f"{where}.previous_services",
            graph,
            groups,
            labels,
            disabled | set(special),
        )
        required[name] = _resolve(
            service.config.required_previous_services,
            f"{where}.required_previous_services",
            graph,
            groups,
            labels,
            disabled | set(special),
        )
        if name in named | required[name]:
            raise PipelineConfigError(
                f"{where}.previous_services: a service cannot wait for "
                "itself (through its own group either)"
            )
        deps[name] = named | required[name]
    order = topological_order(deps, lambda n: graph[n].where)
    nodes = tuple(make(graph[n], deps[n], required[n]) for n in order)
    last_chance = timeout = None
    for service in special.values():
        node = make(service, set(), set())
        if "last_chance" in service.config.tags:
            if last_chance is not None:
                raise PipelineConfigError(
                    f"{service.where}.tags: a second last_chance "
                    f"service (the first is {last_chance.name})"
                )
            last_chance = node
        if "timeout" in service.config.tags:
            if timeout is not None:
                raise PipelineConfigError(
                    f"{service.where}.tags: a second timeout service (the first is {timeout.name})"
                )
            timeout = node
    return DreamPipeline(
        nodes=nodes,
        last_chance=last_chance,
        timeout=timeout,
        connectors_module=config.connectors_module,
        history_window=window,
        turn_timeout=turn_timeout,
        fallback_response=fallback_response,
        metadata=config.metadata,
        disabled={n: "is_enabled: false" for n in sorted(disabled)},
        file_order=tuple(
            s.name for s in parsed if not {"last_chance", "timeout"} & set(s.config.tags)
        ),
    )
