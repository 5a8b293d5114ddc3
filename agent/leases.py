"""Leases on what this agent holds in the database, kept alive by one heartbeat each.

A place in a user's queue and a claim on a client's message id both say "this agent is
working on it". If the agent dies (SIGKILL, a lost machine), nothing would ever say it
stopped, so each carries a lease that a heartbeat renews while the work goes on; once the
heartbeat stops, the lease runs out and another request may take over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from agent.state.models import utc_now

log = logging.getLogger("chorus.leases")

Held = TypeVar("Held", bound=Hashable)


#: The share of a lease after which a renewal that failed is tried again.
RETRY_SHARE = 0.1


class Heartbeat(Generic[Held]):
    """Renews the leases of everything in :attr:`held` once a third of a lease has gone
    since the last renewal that succeeded (measured from when it was sent: the lease it
    wrote runs from then), so a slow renewal does not push the next one later. A
    renewal that failed is tried again after a tenth of a lease (:data:`RETRY_SHARE`)
    rather than a third: with two failures in a row the lease still has half to go.
    A lease lapses only when the agent cannot renew for a whole lease (its event loop
    stalled, the database away); the turn that held it is then fenced at its end
    (docs/turns.md)."""

    def __init__(
        self, lease: float, renew: Callable[[list[Held], datetime], Awaitable[None]], name: str
    ) -> None:
        self.lease = timedelta(seconds=lease)
        self.held: set[Held] = set()
        self._renew = renew
        self._every = lease / 3
        self._retry = lease * RETRY_SHARE
        self._name = name
        self._task: asyncio.Task[None] | None = None

    def lease_end(self) -> datetime:
        return utc_now() + self.lease

    def start(self) -> None:
        """Start beating (idempotent); called on first use, inside the event loop."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._beat_forever(), name=f"chorus-{self._name}-heartbeat"
            )

    async def _beat_forever(self) -> None:
        loop = asyncio.get_running_loop()
        renewed = loop.time()  # when the last renewal that succeeded was sent
        due = renewed + self._every
        while True:
            await asyncio.sleep(max(0.0, due - loop.time()))
            sent = loop.time()
            if not self.held:  # nothing to renew: nothing can lapse
                renewed, due = sent, sent + self._every
                continue
            held = list(self.held)
            try:
                await self._renew(held, self.lease_end())
            except Exception:  # tried again soon; a lapse risks a takeover (then fenced)
                log.warning("could not renew %d %s lease(s)", len(held), self._name, exc_info=True)
                due = loop.time() + self._retry
                continue
            late = sent - renewed - self.lease.total_seconds()
            if late > 0:  # the event loop stalled, or renewals failed, for a whole lease
                log.warning(
                    "%s lease(s) renewed %.1fs after they lapsed: another agent may have "
                    "taken over what they held",
                    self._name,
                    late,
                )
            renewed, due = sent, sent + self._every

    async def aclose(self) -> None:
        """Stop beating (the lifespan's end)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
