"""What the layers above need of a pipeline and its executor, whichever kind it is: the
base both kinds implement, as httpx's transports implement ``_transports/base.py``.

Two kinds of pipeline run here: Chorus's own (:class:`agent.pipeline.kind.ChorusKind`, whose
graph :class:`agent.pipeline.executor.Executor` runs) and a dp-agent ``pipeline_conf.json``
(:class:`agent.dream.kind.DreamKind`, run by :class:`agent.dream.executor.DreamExecutor`);
an experiment's :class:`agent.turn.arms.ArmChooser` is a third executor, running each turn
on one of them.
They differ in how a turn moves through the graph, not in what the message flow, the
composition root, readiness, the pages or ``chorus run`` ask of them; those ask through
:class:`LoadedPipeline`, so each kind decides its own answers (its services, their URLs,
its picture for ``/api/pipeline``, its executor, what ``chorus run`` starts) and nothing
above this layer branches on which one runs. A kind is chosen once, from the file's content
(:func:`agent.kinds.load_any_pipeline`), above both kinds.

The graphs themselves (:mod:`agent.pipeline.graph`, :mod:`agent.dream.graph`) are data: a
kind holds its graph and knows the modules that describe and run it, so imports go from the
kind down to the graph, never back.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from agent.connectors.transport import Transport
from agent.metrics.services import ServiceStats
from agent.state.storage_limits import StorageLimits
from agent.turn.config import Dialect, DoubleTexting, HandoffConfig
from agent.turn.info import PipelineInfo
from agent.turn.value import Turn, TurnResult


class PipelineGraph(Protocol):
    """What a validated graph of either kind tells about itself."""

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

    @property
    def handoff(self) -> HandoffConfig | None:
        """How dialogs are handed to a person; None: they never are (docs/handoff.md)."""
        ...

    def service_names(self, *, fallbacks: bool = False) -> list[str]:
        """The graph's services, each after those it waits for; ``fallbacks``: with the
        services called only when the graph gives no answer (a dp-agent pipeline's last
        chance and timeout services), which metrics count too."""
        ...

    def service_urls(self) -> dict[str, str]:
        """The URL readiness probes for each service called over HTTP."""
        ...

    def listed_names(self) -> list[str]:
        """The names a dialog's ``attributes.pipeline`` lists in dp-agent's view of it."""
        ...

    def required_names(self) -> set[str]:
        """Services another one requires (``required_previous_services``): without them
        that one is skipped, so readiness waits for them."""
        ...


@dataclass(frozen=True, slots=True)
class LocalService:
    """A service ``chorus run`` starts from this repository: ``module`` served on its
    URL's host and port."""

    name: str
    module: str
    host: str
    port: int

    @property
    def health_url(self) -> str:
        return f"http://{self.host}:{self.port}/health"


@dataclass(frozen=True, slots=True)
class LocalServices:
    """What ``chorus run`` does about a pipeline's services before the agent starts."""

    #: services it starts, each from its folder in the repository
    startable: Sequence[LocalService] = ()
    #: services it cannot start, which must already run (to warn about)
    elsewhere: Sequence[str] = ()
    #: services the file lists but leaves off, and why (to show)
    off: Sequence[tuple[str, str]] = ()
    #: a word about where the services run instead, when none is started here
    note: str | None = field(default=None)
    #: services the agent calls in its own process, by name and module (to show)
    in_agent: Sequence[tuple[str, str]] = ()


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """Settings that apply to a dp-agent file only (a Chorus file carries its own)."""

    window: int
    turn_timeout: float | None
    fallback_response: str


class LoadedPipeline(PipelineGraph, Protocol):
    """A validated pipeline of one kind, ready to be given an executor."""

    def describe(self, stats: ServiceStats) -> PipelineInfo:
        """The graph as ``GET /api/pipeline`` shows it, with ``stats``' live numbers."""
        ...

    async def executor(
        self,
        transport: Transport,
        closing: AsyncExitStack,
        *,
        channel_type: str,
        limits: StorageLimits,
    ) -> TurnExecutor:
        """The executor for this pipeline, its connectors calling services over
        ``transport``, opened, and closed with ``closing``."""
        ...

    def local_services(self, root: Path) -> LocalServices:
        """What ``chorus run`` starts from the repository at ``root``."""
        ...


class TurnExecutor(Protocol):
    """Runs turns: the one seam between the message flow and a pipeline. The flow hands
    :meth:`run` one :class:`Turn` and gets one :class:`TurnResult`; it calls nothing else
    during the turn, and nothing calls it back."""

    @property
    def pipeline(self) -> PipelineGraph:
        """The pipeline (an experiment's: its first arm's), whose double-texting policy
        is the agent's."""
        ...

    @property
    def history_window(self) -> int:
        """How many stored utterances the flow reads for a turn of any dialog."""
        ...

    @property
    def whole_history(self) -> bool:
        """Whether a turn's services may be shown its past utterances whole (a dp-agent
        pipeline's formatters are); False: the flow reads them as shown
        (:meth:`agent.store.base.TurnStore.open_turn`)."""
        ...

    def arm_for(self, user_id: str) -> str | None:
        """The experiment arm a new dialog of this user is stored with; None: no
        experiment runs (:class:`agent.turn.arms.ArmChooser` draws one)."""
        ...

    async def run(self, turn: Turn) -> TurnResult:
        """The finished turn; nothing is left running behind it."""
        ...


G = TypeVar("G", bound=PipelineGraph)


class Kind(Generic[G]):
    """A kind's loaded pipeline: its graph, whose answers it passes on; each kind adds how
    it is described, run and started (:class:`LoadedPipeline`)."""

    __slots__ = ("graph",)

    def __init__(self, graph: G) -> None:
        self.graph = graph

    @property
    def turn_timeout(self) -> float | None:
        return self.graph.turn_timeout

    @property
    def history_window(self) -> int:
        return self.graph.history_window

    @property
    def dialect(self) -> Dialect:
        return self.graph.dialect

    @property
    def double_texting(self) -> DoubleTexting:
        return self.graph.double_texting

    @property
    def handoff(self) -> HandoffConfig | None:
        return self.graph.handoff

    def service_names(self, *, fallbacks: bool = False) -> list[str]:
        return self.graph.service_names(fallbacks=fallbacks)

    def service_urls(self) -> dict[str, str]:
        return self.graph.service_urls()

    def listed_names(self) -> list[str]:
        return self.graph.listed_names()

    def required_names(self) -> set[str]:
        return self.graph.required_names()
