"""One turn's schedule, shared by both pipeline kinds: every service runs as soon as those it
waits for are done, unless the kind gives a reason to skip it, and whatever is still running
when the turn's deadline passes (or the kind stops the turn early) is cancelled.

What a service's call is, why it is skipped and how a cancelled one is recorded are the
kind's (:class:`Plan`); the order of those steps, the per-service ``done`` events, the
deadline and the cancelling are the same for both, and live here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from agent.pipeline.calls import Skip

log = logging.getLogger("chorus.executor")


class Node(Protocol):
    """A service as the schedule sees it: its name, and the names it waits for."""

    @property
    def name(self) -> str: ...

    @property
    def depends_on(self) -> frozenset[str]: ...


N = TypeVar("N", bound=Node, contravariant=True)
R = TypeVar("R", contravariant=True)
NodeT = TypeVar("NodeT", bound=Node)
RunT = TypeVar("RunT")


class Plan(Protocol[R, N]):
    """What one kind's executor decides about a service in a turn ``run``."""

    def waits_for(self, run: R, node: N) -> Iterable[str]:
        """Services to wait for besides ``node.depends_on`` (a tiered skill's lower tiers)."""
        ...

    def skip(self, run: R, node: N) -> Skip | None:
        """Why the service does not run this turn (None: it runs)."""
        ...

    def skipped(self, run: R, node: N, start: float, skip: Skip) -> None:
        """Record the skip."""
        ...

    async def call(self, run: R, node: N, start: float) -> None:
        """Call the service and apply its output; its failure is contained and recorded."""
        ...

    def cut_off(self, run: R, node: N, start: float) -> None:
        """Record the service's call as cancelled (the deadline passed, or the turn was
        stopped early)."""
        ...

    def settled(self, run: R, node: N) -> None:
        """The service is done, whichever way: another step may follow (streams released)."""
        ...


class Schedule:
    """One turn's ``done`` event per service, and the running of a set of them."""

    def __init__(self, names: Iterable[str], clock: Callable[[], float]) -> None:
        self.done = {name: asyncio.Event() for name in names}
        self._clock = clock

    async def run(
        self,
        plan: Plan[RunT, NodeT],
        run: RunT,
        nodes: Sequence[NodeT],
        remaining: float | None,
        until: asyncio.Event | None = None,
    ) -> bool:
        """Run ``nodes`` together, each once what it waits for is done, for at most
        ``remaining`` seconds (None: no limit) or until ``until`` is set; what is still
        running then is cancelled, and nothing is left running on return. False when the
        time ran out first. A bug that escapes a service's step is raised here, once
        every other service has ended."""
        if not nodes:
            return True
        tasks = [asyncio.create_task(self._node(plan, run, node)) for node in nodes]
        stopper: asyncio.Future[Any] | None = None
        try:
            if until is None:  # the common case, with the fewest futures and callbacks
                _, pending = await asyncio.wait(tasks, timeout=remaining)
                in_time = not pending
            else:
                stopper = asyncio.ensure_future(until.wait())
                everything = asyncio.gather(*tasks, return_exceptions=True)
                done, _ = await asyncio.wait(
                    [everything, stopper], timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
                in_time = bool(done)
        finally:
            if stopper is not None:
                stopper.cancel()
            running = [task for task in tasks if not task.done()]
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running)
            # every outcome looked at (asyncio logs an exception nobody retrieved)
            errors = [task.exception() for task in tasks if task.done() and not task.cancelled()]
        for error in errors:
            if isinstance(error, Exception):
                raise error
        return in_time

    async def _node(self, plan: Plan[RunT, NodeT], run: RunT, node: NodeT) -> None:
        start = self._clock()
        try:
            for name in node.depends_on:
                await self.done[name].wait()
            for name in plan.waits_for(run, node):
                await self.done[name].wait()
            start = self._clock()
            skip = plan.skip(run, node)
            if skip is not None:
                plan.skipped(run, node, start, skip)
                return
            await plan.call(run, node, start)
        except asyncio.CancelledError:
            plan.cut_off(run, node, start)
            raise
        finally:
            self.done[node.name].set()
            plan.settled(run, node)
