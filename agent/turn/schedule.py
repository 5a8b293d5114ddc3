"""One turn's schedule, shared by both pipeline kinds: which services are done, and the
running of the turn's steps together until the deadline (or an early stop), when whatever
is still running is cancelled.

Each kind writes its own step for a service (wait for what it needs, skip it or call it,
record how it ended, mark it done): the executor calls the schedule, the schedule never
calls the executor back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any


class Schedule:
    """One turn's record of the services done, and the running of a set of them."""

    def __init__(self, names: Iterable[str]) -> None:
        #: the turn's services
        self.names = frozenset(names)
        #: The services done this turn, whichever way each ended.
        self.done: set[str] = set()
        #: Each step waiting in :meth:`after`: its future, and the services it still
        #: waits for. One future a waiting step, not an ``asyncio.Event`` a service and a
        #: wait on each (their futures, waiter lists and loop look-ups were a good part of
        #: a turn's calls: docs/performance.md, "Half the CPU").
        self._waiting: dict[asyncio.Future[None], set[str]] = {}

    async def after(self, names: Iterable[str]) -> None:
        """Return once every service named is done."""
        done = self.done
        missing = {name for name in names if name not in done}
        if not missing:
            return
        if not missing <= self.names:  # never done: a name the turn has no service for
            raise KeyError(", ".join(sorted(missing - self.names)))
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[waiter] = missing
        try:
            await waiter
        finally:
            del self._waiting[waiter]

    def finished(self, name: str) -> None:
        """The service is done, whichever way it ended: those waiting for it go on."""
        self.done.add(name)
        for waiter, missing in self._waiting.items():
            missing.discard(name)
            if not missing and not waiter.done():
                waiter.set_result(None)

    async def run(
        self,
        steps: Sequence[Coroutine[Any, Any, None]],
        remaining: float | None,
        until: asyncio.Event | None = None,
    ) -> bool:
        """Run ``steps`` together for at most ``remaining`` seconds (None: no limit) or
        until ``until`` is set; what is still running then is cancelled, and nothing is
        left running on return. False when the time ran out first. A bug that escapes a
        step is raised here, once every other step has ended."""
        if not steps:
            return True
        tasks = [asyncio.create_task(step) for step in steps]
        stopper: asyncio.Future[Any] | None = None
        try:
            if until is None:  # the common case, with the fewest futures and callbacks
                in_time = await _all_done(tasks, remaining)
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


async def _all_done(tasks: list[asyncio.Task[None]], seconds: float | None) -> bool:
    """``asyncio.wait(tasks, timeout=seconds)`` for the schedule's one use of it: wait
    until every task has ended or the time is up, and say whether they all ended. One
    future and one callback per task, without ``asyncio.wait``'s checks of what it is
    given, its set of futures and its own callback object per call: the schedule waits
    so on every turn (docs/performance.md, "Half the CPU")."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    left = len(tasks)

    def ended(_: asyncio.Task[None]) -> None:
        nonlocal left
        left -= 1
        if left == 0 and not waiter.done():
            waiter.set_result(None)

    for task in tasks:
        task.add_done_callback(ended)
    timer = None if seconds is None else loop.call_later(seconds, _release, waiter)
    try:
        await waiter
    finally:
        if timer is not None:
            timer.cancel()
        for task in tasks:
            task.remove_done_callback(ended)
    # a task may have ended in the same turn of the loop as the timer, its callback not
    # yet run: asyncio.wait would count it as done
    return left == 0 or all(task.done() for task in tasks)


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
