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


class Heartbeat(Generic[Held]):
    """Renews the leases of everything in :attr:`held` every third of a lease."""

    def __init__(
        self, lease: float, renew: Callable[[list[Held], datetime], Awaitable[None]], name: str
    ) -> None:
        self.lease = timedelta(seconds=lease)
        self.held: set[Held] = set()
        self._renew = renew
        self._every = lease / 3
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
        while True:
            await asyncio.sleep(self._every)
            if not self.held:
                continue
            held = list(self.held)
            try:
                await self._renew(held, self.lease_end())
            except Exception:  # the next beat tries again; a lapse only risks a takeover
                log.warning("could not renew %d %s lease(s)", len(held), self._name, exc_info=True)

    async def aclose(self) -> None:
        """Stop beating (the lifespan's end)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
