"""One message of a user at a time, in arrival order, across every agent replica.

Two messages of one user that overlap would read the same history and attributes and
interleave their utterances (human, human, bot, bot), and one attribute update would
overwrite the other. So each message takes a numbered place in the user's line in the
store (:meth:`Store.enqueue`) and starts its turn only when every earlier place is done.

The line lives in the database, not in this process, so replicas sharing one MongoDB
see the same line. What this process keeps is only a wake-up hint (a message finished
here, so its successor waiting here need not wait for its next poll) and the places it
holds, whose leases a heartbeat renews: a place whose agent died (SIGKILL, a lost
machine) stops being renewed, and the next message gives it up once its lease runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

from agent.state.models import utc_now
from agent.store.base import Store, StoreUnavailable

log = logging.getLogger("chorus.ordering")

#: Polling interval for a place that waits on another replica: it starts short (a turn is
#: milliseconds) and backs off, so a long wait costs few queries.
_FIRST_POLL = 0.005
_MAX_POLL = 0.1


class LineTimeout(Exception):
    """The user's earlier messages did not finish within the wait limit."""

    def __init__(self, waited: float) -> None:
        super().__init__(f"earlier messages of this user are still being answered after "
                         f"{waited:.0f}s; retry shortly")
        self.waited = waited


class UserLines:
    """Serialises each user's turns through the store; see the module docstring."""

    def __init__(self, store: Store, *, lease: float = 10.0, max_wait: float = 60.0) -> None:
        self._store = store
        self._lease = timedelta(seconds=lease)
        self._heartbeat_every = lease / 3
        self._max_wait = max_wait
        self._held: set[tuple[str, int]] = set()
        self._finished: dict[str, asyncio.Event] = {}
        self._heartbeat: asyncio.Task[None] | None = None

    def _lease_end(self) -> datetime:
        return utc_now() + self._lease

    @contextlib.asynccontextmanager
    async def turn(self, user_id: str) -> AsyncIterator[None]:
        """Wait for the user's earlier messages, then hold the line until the block ends."""
        self._start_heartbeat()
        place, first = await self._store.enqueue(user_id, self._lease_end())
        self._held.add((user_id, place))
        served = False
        try:
            if not first:
                await self._wait(user_id, place)
            served = True
            yield
        finally:
            self._held.discard((user_id, place))
            # Shielded: a cancelled request (client gone, shutdown) must still free the
            # line; if the store is down, the lease runs out and frees it instead.
            with contextlib.suppress(StoreUnavailable):
                await asyncio.shield(self._store.leave(user_id, place, served=served))
            event = self._finished.pop(user_id, None)
            if event is not None:
                event.set()

    async def _wait(self, user_id: str, place: int) -> None:
        loop = asyncio.get_running_loop()
        started, poll = loop.time(), _FIRST_POLL
        while not await self._store.first_in_line(user_id, place, utc_now()):
            waited = loop.time() - started
            if waited > self._max_wait:
                raise LineTimeout(waited)
            event = self._finished.setdefault(user_id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), poll)
            poll = min(poll * 2, _MAX_POLL)

    def _start_heartbeat(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.get_running_loop().create_task(
                self._renew_forever(), name="chorus-line-heartbeat")

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_every)
            if not self._held:
                continue
            try:
                await self._store.renew_places(sorted(self._held), self._lease_end())
            except Exception:  # the next beat tries again; a lapse only risks a skip
                log.warning("could not renew %d place(s) in line", len(self._held),
                            exc_info=True)

    async def aclose(self) -> None:
        """Stop the heartbeat (the lifespan's end)."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
