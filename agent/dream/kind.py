"""A dp-agent ``pipeline_conf.json`` as one kind: how it is loaded, described, run and
started.

The graph (:mod:`agent.dream.graph`) is data; this module is the one that knows the
modules built on it: the description (:mod:`agent.dream.info`), the connectors
(:mod:`agent.dream.connectors`) and the executor (:mod:`agent.dream.executor`).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

from agent.connectors.transport import Transport
from agent.dream.config import is_dp_agent_config
from agent.dream.connectors import check_python_connectors, make_dream_connectors
from agent.dream.executor import DreamExecutor
from agent.dream.graph import DreamPipeline, build_dream_pipeline
from agent.dream.info import describe_dream
from agent.metrics.services import ServiceStats
from agent.state.storage_limits import StorageLimits
from agent.turn.base import Kind, LoadOptions, LocalServices, TurnExecutor
from agent.turn.config import PipelineConfigError
from agent.turn.info import PipelineInfo


class DreamKind(Kind[DreamPipeline]):
    """A dp-agent pipeline file, loaded."""

    __slots__ = ()

    @staticmethod
    def recognises(document: object) -> bool:
        """Whether ``document`` is a dp-agent pipeline file (told by its content)."""
        return is_dp_agent_config(document)

    @classmethod
    def load(cls, document: object, source: str, options: LoadOptions) -> DreamKind:
        """The pipeline ``document`` (read from ``source``) describes, its formatters and
        python connectors imported, or what is wrong."""
        pipeline = build_dream_pipeline(
            document,
            source,
            window=options.window,
            turn_timeout=options.turn_timeout,
            fallback_response=options.fallback_response,
        )
        try:
            check_python_connectors(pipeline)
        except PipelineConfigError as exc:
            raise PipelineConfigError(f"{source}: {exc}") from None
        return cls(pipeline)

    def describe(self, stats: ServiceStats) -> PipelineInfo:
        return describe_dream(self.graph, stats)

    async def executor(
        self,
        transport: Transport,
        closing: AsyncExitStack,
        *,
        channel_type: str,
        limits: StorageLimits,
    ) -> TurnExecutor:
        """A :class:`~agent.dream.executor.DreamExecutor`; services naming one top-level
        connector share it, and it is closed once."""
        connectors = make_dream_connectors(self.graph, transport)
        for connector in {id(c): c for c in connectors.values()}.values():
            closing.push_async_callback(connector.aclose)
        return DreamExecutor(self.graph, connectors, channel_type, limits=limits)

    def local_services(self, root: Path) -> LocalServices:
        """None: a Dream distribution's services run from its own compose files."""
        return LocalServices(
            note="a dp-agent pipeline: its services are not started here "
            "(run them from Dream's compose files)"
        )
