"""One connector per pipeline service, from its config."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from agent.connectors.base import Connector
from agent.connectors.batching import Batcher
from agent.connectors.builtin import AllSkillsSelector, HighestConfidenceSelector
from agent.connectors.http import HttpConnector
from agent.connectors.parlai import ParlaiConnector
from agent.pipeline.graph import Pipeline, ServiceNode

_BUILTINS: dict[str, Callable[[str], Connector]] = {
    "highest_confidence": HighestConfidenceSelector,
    "all_skills": AllSkillsSelector,
}


def make_connector(node: ServiceNode, client: httpx.AsyncClient) -> Connector:
    connector = node.config.connector
    if connector.builtin is not None:
        return _BUILTINS[connector.builtin](node.name)
    if connector.protocol == "parlai":
        return ParlaiConnector(node.name, str(connector.url), client, connector.timeout)
    return HttpConnector(node.name, str(connector.url), client, connector.timeout)


def make_batchers(pipeline: Pipeline, client: httpx.AsyncClient) -> dict[str, Batcher]:
    return {
        node.name: Batcher(make_connector(node, client), node.config.connector.batch_size)
        for node in pipeline
    }
