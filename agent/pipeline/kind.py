"""Chorus's own pipeline file as one kind: how it is loaded, described, run and started.

The graph (:mod:`agent.pipeline.graph`) is data; this module is the one that knows the
modules built on it: the description (:mod:`agent.pipeline.info`), the connectors
(:mod:`agent.pipeline.connectors`) and the executor (:mod:`agent.pipeline.executor`).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from pathlib import Path
from urllib.parse import urlsplit

from agent.connectors.transport import Transport
from agent.metrics.services import ServiceStats
from agent.pipeline.config import parse_pipeline_config
from agent.pipeline.connectors import check_in_process, make_batchers
from agent.pipeline.executor import Executor
from agent.pipeline.graph import Pipeline, build_pipeline
from agent.pipeline.info import describe
from agent.sdk.roles import Role
from agent.state.storage_limits import StorageLimits
from agent.turn.base import Kind, LocalService, LocalServices, TurnExecutor
from agent.turn.info import PipelineInfo

#: The repository's folder for each role's services (``skills/<name>/app.py``...).
GROUP_FOLDERS: dict[Role, str] = {
    "annotators": "annotators",
    "candidate_annotators": "annotators",
    "response_annotators": "annotators",
    "skill_selectors": "skill_selectors",
    "skills": "skills",
    "response_selectors": "response_selectors",
}
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}

log = logging.getLogger("chorus.connectors")


class ChorusKind(Kind[Pipeline]):
    """A Chorus pipeline file, loaded."""

    __slots__ = ()

    @classmethod
    def load(cls, document: object, source: str) -> ChorusKind:
        """The pipeline ``document`` (read from ``source``) describes, or what is wrong."""
        pipeline = build_pipeline(parse_pipeline_config(document, source=source))
        check_in_process(pipeline)
        return cls(pipeline)

    def describe(self, stats: ServiceStats) -> PipelineInfo:
        return describe(self.graph, stats)

    async def executor(
        self,
        transport: Transport,
        closing: AsyncExitStack,
        *,
        channel_type: str,
        limits: StorageLimits,
    ) -> TurnExecutor:
        """An :class:`~agent.pipeline.executor.Executor` with a batcher per service (the
        channel plays no part in a Chorus pipeline's requests). In-process services open
        their lifespan here, all at once, so the first turn does not wait for them; each is
        waited for at most its service's timeout
        (:meth:`agent.connectors.in_process.InProcessConnector.open`), so one that never
        opens cannot keep the agent from starting."""
        batchers = make_batchers(self.graph, transport)
        for batcher in batchers.values():
            closing.push_async_callback(batcher.aclose)
        in_agent = [node.name for node in self.graph if node.config.connector.module is not None]
        if in_agent:
            log.info(
                "called in the agent's process: %s. Each call is bounded by its service's "
                "timeout (a later answer is not used); a handler holding the event loop past "
                "it is named in this log, and the second time its circuit opens; a sync "
                "handler holds at most its `threads` threads; a lifespan is waited for at "
                "most its timeout (docs/configuration.md, services in the agent's process)",
                ", ".join(in_agent),
            )
        await asyncio.gather(*(batcher.connector.open() for batcher in batchers.values()))
        return Executor(self.graph, batchers, limits=limits)

    def local_services(self, root: Path) -> LocalServices:
        """Each service on a local URL whose folder (``skills/<name>/app.py``...) is in
        ``root`` is started there; the others must already run, but for those the agent
        calls in its own process."""
        found, elsewhere, in_agent = [], [], []
        for node in self.graph:
            url = node.config.connector.url
            if node.config.connector.module is not None:
                in_agent.append((node.name, node.config.connector.module))
            if url is None:
                continue
            folder = GROUP_FOLDERS[node.role]
            parts = urlsplit(str(url))
            if parts.hostname in LOCAL_HOSTS and (root / folder / node.name / "app.py").is_file():
                module = f"{folder}.{node.name}.app:app"
                found.append(
                    LocalService(node.name, module, parts.hostname or "127.0.0.1", parts.port or 80)
                )
            else:
                elsewhere.append(f"{node.name} ({url})")
        off = [(service.name, service.reason) for service in self.graph.disabled]
        return LocalServices(found, elsewhere, off, in_agent=in_agent)
