"""One message of a user at a time, in arrival order, across every agent replica.

Two messages of one user that overlap would read the same history and attributes and
interleave their utterances (human, human, bot, bot), and one attribute update would
overwrite the other. So each message takes a numbered place in the user's line in the
store (:meth:`LineStore.take_place`) and starts its turn only when every earlier place is
done.

The line lives in the database, not in this process, so replicas sharing one MongoDB
see the same line. What this process keeps is only a wake-up hint (a message finished
here, so its successor waiting here need not wait for its next poll) and the places it
holds, whose leases a heartbeat renews: a place whose agent died (SIGKILL, a lost
machine) stops being renewed, and the next message gives it up once its lease runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime

from agent.leases import Heartbeat
from agent.sdk.errors import ChorusError
from agent.state.models import utc_now
from agent.store.base import LineStore, Place, StoreUnavailable

#: Polling interval for a place that waits on another replica: it starts short (a turn is
#: milliseconds) and backs off, so a long wait costs few queries.
_FIRST_POLL = 0.005
_MAX_POLL = 0.1


class LineTimeout(ChorusError):
    """The user's earlier messages did not finish within the wait limit."""

    def __init__(self, waited: float) -> None:
        super().__init__(
            f"earlier messages of this user are still being answered after "
            f"{waited:.0f}s; retry shortly"
        )
        self.waited = waited


class UserLines:
    """Serialises each user's turns through the store; see the module docstring."""

    def __init__(self, store: LineStore, *, lease: float = 10.0, max_wait: float = 60.0) -> None:
        self._store = store
        self._max_wait = max_wait
        self._heartbeat: Heartbeat[tuple[str, int]] = Heartbeat(lease, self._renew, "line")
        self._finished: dict[str, asyncio.Event] = {}

    async def _renew(self, places: list[tuple[str, int]], lease_until: datetime) -> None:
        await self._store.renew_places(sorted(places), lease_until)

    @contextlib.asynccontextmanager
    async def turn(self, user_id: str) -> AsyncIterator[Place]:
        """Wait for the user's earlier messages, then hold the line until the block ends.
        The place is yielded so that the turn's last write can leave the line too
        (:meth:`DialogStore.finish_turn`); otherwise it is left here."""
        held = self._heartbeat.held
        self._heartbeat.start()
        place = await self._store.take_place(user_id, self._heartbeat.lease_end())
        holding = (user_id, place.number)
        held.add(holding)
        served = False
        try:
            if not place.first:
                await self._wait(place)
            served = True
            yield place
        finally:
            held.discard(holding)
            # Shielded: a cancelled request (client gone, shutdown) must still free the
            # line; if the store is down, the lease runs out and frees it instead.
            if not place.left:
                with contextlib.suppress(StoreUnavailable):
                    await asyncio.shield(self._store.leave(place, served=served))
            event = self._finished.pop(user_id, None)
            if event is not None:
                event.set()

    async def _wait(self, place: Place) -> None:
        loop = asyncio.get_running_loop()
        started, poll = loop.time(), _FIRST_POLL
        while not await self._store.first_in_line(place, utc_now()):
            waited = loop.time() - started
            if waited > self._max_wait:
                raise LineTimeout(waited)
            event = self._finished.setdefault(place.user_id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), poll)
            poll = min(poll * 2, _MAX_POLL)

    async def aclose(self) -> None:
        """Stop the heartbeat (the lifespan's end)."""
        await self._heartbeat.aclose()
