"""One probe at a time while the MongoDB server is away (:class:`Outage`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from pymongo import AsyncMongoClient
from pymongo.errors import ConnectionFailure, PyMongoError

from agent.store.base import StoreUnavailable

log = logging.getLogger("chorus.store")

#: Seconds between two probes of a server that did not answer the last (each probe also
#: waits the driver's server selection, so a down server is asked about every 3 s).
PROBE_INTERVAL = 0.1


class Outage:
    """Whether a call last failed to reach the server, and the one probe that looks for it
    back: the store's calls wait for that probe instead of going to the driver.

    Why: on a call's connection failure PyMongo marks the server unknown and pauses its
    connection pool, and its monitor readies the pool again once it reaches the server. A
    call that fails on the paused pool counts as a new failure of the server, which pauses
    the pool again. While many calls fail at once (every user's retry, every lease's
    renewal), one of them fails on the paused pool just as the monitor readies it, and the
    server is lost again: on a busy machine the agent answered nobody for over a minute
    after the database was back (docs/storage.md, "When the database goes away"). So once
    a call has failed for the connection, calls wait for one ``ping`` to succeed and only
    then go to the driver: none fails on the paused pool, and the pool stays ready once
    the monitor readied it. A call that has waited as long as the driver waits for a
    server (its server selection) gets :class:`StoreUnavailable` without being sent.
    """

    def __init__(self, client: AsyncMongoClient[Any]) -> None:
        self._client = client
        self._back = asyncio.Event()
        self._back.set()
        self._probe: asyncio.Task[None] | None = None
        self._since = 0.0

    @property
    def away(self) -> bool:
        """Whether the server is being looked for (no ``ping`` has answered since a call
        failed)."""
        return not self._back.is_set()

    def began(self) -> None:
        """A call failed to reach the server: later calls wait for the probe, started here
        unless it runs."""
        if not self.away:
            self._since = time.monotonic()
            log.warning("the database went away: the store's calls wait for it to answer")
        self._back.clear()
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(
                self._look(), name="chorus-store-probe"
            )

    async def passed(self) -> None:
        """Return at once when the server is not away, or once the probe reaches it; raise
        :class:`StoreUnavailable` if it does not within the driver's server selection."""
        if not self.away:
            return
        wait = self._client.options.server_selection_timeout
        try:
            async with asyncio.timeout(wait):
                await self._back.wait()
        except TimeoutError:
            raise StoreUnavailable(
                f"MongoDB store: the server has not answered for {wait:g} s"
            ) from None

    async def _look(self) -> None:
        while True:
            try:
                await self._client.admin.command("ping")
            except ConnectionFailure:
                await asyncio.sleep(PROBE_INTERVAL)
                continue
            except PyMongoError:
                pass  # it answered, if not with a pong: it is there
            break
        log.info("the database is back after %.1f s", time.monotonic() - self._since)
        self._back.set()

    async def aclose(self) -> None:
        """Stop the probe (the store's end)."""
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
