"""One connector per pipeline service, from its config.

It lives in the pipeline, not in :mod:`agent.connectors`, because it reads the pipeline's
config: connectors know nothing of pipelines (imports point down the layers).
"""

from __future__ import annotations

from collections.abc import Callable

from agent.connectors.base import Connector
from agent.connectors.batching import Batcher
from agent.connectors.breaker import CircuitBreaker, GuardedConnector
from agent.connectors.builtin import AllSkillsSelector, HighestConfidenceSelector
from agent.connectors.http import HttpConnector
from agent.connectors.parlai import ParlaiConnector
from agent.connectors.transport import Transport
from agent.pipeline.graph import Pipeline, ServiceNode
from agent.sdk.models import DialogView

_BUILTINS: dict[str, Callable[[str], Connector[DialogView]]] = {
    "highest_confidence": HighestConfidenceSelector,
    "all_skills": AllSkillsSelector,
}


def make_connector(node: ServiceNode, transport: Transport) -> Connector[DialogView]:
    """Built-ins as they are; remote services behind a circuit breaker."""
    config = node.config.connector
    if config.builtin is not None:
        return _BUILTINS[config.builtin](node.name)
    remote: Connector[DialogView]
    if config.protocol == "parlai":
        remote = ParlaiConnector(node.name, str(config.url), transport, config.timeout)
    else:
        remote = HttpConnector(node.name, str(config.url), transport, config.timeout)
    breaker = CircuitBreaker(node.name, config.breaker_threshold, config.breaker_reset)
    return GuardedConnector(remote, breaker, config.retries)


def make_batchers(pipeline: Pipeline, transport: Transport) -> dict[str, Batcher[DialogView]]:
    return {
        node.name: Batcher(make_connector(node, transport), node.config.connector.batch_size)
        for node in pipeline
    }
