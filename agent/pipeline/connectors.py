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
from agent.pipeline.config import PipelineConfigError
from agent.pipeline.graph import Pipeline, ServiceNode
from agent.sdk.models import DialogView

_BUILTINS: dict[str, Callable[[str], Connector[DialogView]]] = {
    "highest_confidence": HighestConfidenceSelector,
    "all_skills": AllSkillsSelector,
}


def make_connector(node: ServiceNode, transport: Transport) -> Connector[DialogView]:
    """Built-ins and in-process services as they are; remote services behind a circuit
    breaker. An in-process service's module is imported here, at start-up, so one that
    cannot be loaded stops the agent naming its entry."""
    config = node.config.connector
    if config.builtin is not None:
        return _BUILTINS[config.builtin](node.name)
    if config.module is not None:
        return in_process(node, config.module)
    remote: Connector[DialogView]
    if config.protocol == "parlai":
        remote = ParlaiConnector(node.name, str(config.url), transport, config.timeout)
    else:
        remote = HttpConnector(node.name, str(config.url), transport, config.timeout)
    breaker = CircuitBreaker(node.name, config.breaker_threshold, config.breaker_reset)
    return GuardedConnector(remote, breaker, config.retries)


def in_process(node: ServiceNode, module: str) -> InProcessConnector:
    """The connector of a service called in the agent's process, or the entry to fix."""
    with _entry(node):
        return InProcessConnector(node.name, load_service(module, node.role))


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
