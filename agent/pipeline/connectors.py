"""One connector per pipeline service, from its config.

It lives in the pipeline, not in :mod:`agent.connectors`, because it reads the pipeline's
config: connectors know nothing of pipelines (imports point down the layers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from agent.connectors.base import Connector
from agent.connectors.batching import Batcher
from agent.connectors.breaker import CircuitBreaker, GuardedConnector
from agent.connectors.builtin import AllSkillsSelector, HighestConfidenceSelector
from agent.connectors.http import HttpConnector
from agent.connectors.in_process import (
    InProcessConnector,
    ServiceNotLoaded,
    find_service,
    load_service,
)
from agent.connectors.parlai import ParlaiConnector
from agent.connectors.transport import Transport
from agent.pipeline.graph import Pipeline, ServiceNode
from agent.sdk.models import DialogView
from agent.turn.config import PipelineConfigError

_BUILTINS: dict[str, Callable[[str], Connector[DialogView]]] = {
    "highest_confidence": HighestConfidenceSelector,
    "all_skills": AllSkillsSelector,
}


def make_connector(node: ServiceNode, transport: Transport) -> Connector[DialogView]:
    """Built-ins as they are; remote and in-process services behind a circuit breaker (an
    in-process service that keeps failing, or holds the event loop, is not called until a
    trial either). An in-process service's module is imported here, at start-up, so one
    that cannot be loaded stops the agent naming its entry."""
    config = node.config.connector
    if config.builtin is not None:
        return _BUILTINS[config.builtin](node.name)
    breaker = CircuitBreaker(node.name, config.breaker_threshold, config.breaker_reset)
    called: Connector[DialogView]
    if config.module is not None:
        called = in_process(node, config.module, breaker)
    elif config.protocol == "parlai":
        called = ParlaiConnector(node.name, str(config.url), transport, config.timeout)
    else:
        called = HttpConnector(node.name, str(config.url), transport, config.timeout)
    return GuardedConnector(called, breaker, config.retries)


def in_process(node: ServiceNode, module: str, breaker: CircuitBreaker) -> InProcessConnector:
    """The connector of a service called in the agent's process, or the entry to fix."""
    config = node.config.connector
    with _entry(node):
        service = load_service(module, node.role)
    return InProcessConnector(
        node.name, service, config.timeout, threads=config.threads, breaker=breaker
    )


def check_in_process(pipeline: Pipeline) -> None:
    """Import every in-process service's module, so that one which cannot give a service
    stops the agent before it listens (a factory is called when the agent starts)."""
    for node in pipeline:
        if node.config.connector.module is not None:
            with _entry(node):
                find_service(node.config.connector.module, node.role)


@contextmanager
def _entry(node: ServiceNode) -> Iterator[None]:
    try:
        yield
    except ServiceNotLoaded as exc:
        where = f"services.{node.role}.{node.name}.connector.module"
        raise PipelineConfigError(f"{where}: {exc}") from None


def make_batchers(pipeline: Pipeline, transport: Transport) -> dict[str, Batcher[DialogView]]:
    return {
        node.name: Batcher(make_connector(node, transport), node.config.connector.batch_size)
        for node in pipeline
    }
