"""What the layers above need of a pipeline and its executor, whichever format it came from.

Two kinds of pipeline run here: Chorus's own (:class:`agent.pipeline.graph.Pipeline`, run by
:class:`agent.pipeline.executor.Executor`) and a dp-agent ``pipeline_conf.json``
(:class:`agent.dream.graph.DreamPipeline`, run by :class:`agent.dream.executor.DreamExecutor`).
They differ in how a turn moves through the graph, not in what the message flow, the
composition root, readiness or the pages ask of them; those ask through these two
protocols, so each kind decides its own answers (its services, their URLs, its picture for
``/api/pipeline``, its executor) and nothing above this layer branches on which one runs.
The one place that knows both kinds is the loader that reads the file and picks one
(:func:`agent.dream.loading.load_any_pipeline`).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Protocol

import aiohttp

from agent.metrics.services import ServiceStats
from agent.pipeline.config import Dialect, DoubleTexting
from agent.pipeline.executor import Turn, TurnResult
from agent.pipeline.info import PipelineInfo
from agent.state.limits import StorageLimits


class LoadedPipeline(Protocol):
    """A validated pipeline, ready to be given an executor."""

    @property
    def turn_timeout(self) -> float | None:
        """Seconds a turn may take before its deadline; None: no deadline for the whole
        turn (a dp-agent pipeline's default), each service bounded by its own timeout."""
        ...

    @property
    def history_window(self) -> int:
        """How many stored utterances a turn reads."""
        ...

    @property
    def dialect(self) -> Dialect:
        """Whose clients the file was written for: ``dp-agent`` for a dp-agent file, whose
        clients read dp-agent's reply and dialog shapes unless a setting says otherwise."""
        ...

    @property
    def double_texting(self) -> DoubleTexting:
        """The policy for a message that arrives while the user's previous one is answered."""
        ...

    def service_names(self, *, fallbacks: bool = False) -> list[str]:
        """The graph's services, each after those it waits for; ``fallbacks``: with the
        services called only when the graph gives no answer (a dp-agent pipeline's last
        chance and timeout services), which metrics count too."""
        ...

    def service_urls(self) -> dict[str, str]:
        """The URL readiness probes for each service called over HTTP."""
        ...

    def required_names(self) -> set[str]:
        """Services another one requires (``required_previous_services``): without them
        that one is skipped, so readiness waits for them."""
        ...

    def describe(self, stats: ServiceStats) -> PipelineInfo:
        """The graph as ``GET /api/pipeline`` shows it, with ``stats``' live numbers."""
        ...

    def executor(
        self,
        client: aiohttp.ClientSession,
        closing: AsyncExitStack,
        *,
        channel_type: str,
        limits: StorageLimits,
    ) -> TurnExecutor:
        """The executor for this pipeline, its connectors made on ``client`` and closed
        with ``closing``."""
        ...


class TurnExecutor(Protocol):
    """Runs turns through one pipeline."""

    @property
    def pipeline(self) -> LoadedPipeline: ...

    async def run(self, turn: Turn) -> TurnResult:
        """The finished turn; nothing is left running behind it."""
        ...
