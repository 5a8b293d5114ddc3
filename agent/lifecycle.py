"""The data lifecycle's background sweep: what ``CHORUS_RETAIN_CLOSED_DIALOGS``,
``CHORUS_CLOSE_IDLE_DIALOGS`` and ``CHORUS_COMPACT_TURNS_AFTER`` ask for.

The store does the work (a method per rule of :class:`agent.store.base.LifecycleStore`,
applied by :func:`sweep`), a bounded batch per pass; this task only paces the passes (one
every ``SWEEP_INTERVAL``, the next at once while a round has work left), counts what
each rule removed on ``/metrics`` and, at the end of each round, the store's size. A
database that is down costs a logged pass, never the agent. With no rule set, no task
runs and everything is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime

from agent.metrics import Metrics
from agent.state.models import utc_now
from agent.store.base import LifecycleStore, Retention, StoreUnavailable, Swept

#: Seconds between two passes of the sweep (a round with work left goes on at once).
SWEEP_INTERVAL = 60.0
#: Records each rule looks at per pass: the bound of one pass's cost (docs/storage.md).
SWEEP_BATCH = 100

log = logging.getLogger("chorus.lifecycle")


async def sweep(store: LifecycleStore, retention: Retention, now: datetime, batch: int) -> Swept:
    """One pass: each rule of ``retention`` looks at the next ``batch`` records of its
    walk, as of ``now``; the round is over when every rule's walk went past its last."""
    swept = Swept(round_done=True)
    if retention.closed_dialogs is not None:
        swept.round_done &= await store.delete_closed(now - retention.closed_dialogs, batch, swept)
    if retention.idle_dialogs is not None:
        swept.round_done &= await store.close_idle(now - retention.idle_dialogs, now, batch, swept)
    if retention.compact_turns is not None:
        swept.round_done &= await store.compact(now - retention.compact_turns, batch, swept)
    return swept


class Sweeper:
    """Runs the sweep in the background; :meth:`run_pass` is one pass, for tests and
    benchmarks, with ``clock`` giving the time the rules are applied at."""

    def __init__(
        self,
        store: LifecycleStore,
        retention: Retention,
        metrics: Metrics,
        *,
        interval: float = SWEEP_INTERVAL,
        batch: int = SWEEP_BATCH,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._store = store
        self._retention = retention
        self._metrics = metrics
        self._interval = interval
        self._batch = batch
        self._clock = clock
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._retention.any and self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._sweep_forever(), name="chorus-sweep"
            )

    async def run_pass(self) -> Swept:
        """One pass of every rule; its counts go to ``/metrics``."""
        swept = await sweep(self._store, self._retention, self._clock(), self._batch)
        self._metrics.observe_sweep(swept)
        if swept.round_done:
            self._metrics.observe_sizes(await self._store.sizes())
        return swept

    async def run_round(self) -> Swept:
        """Passes until every rule has looked at every record once; their counts summed."""
        total = Swept()
        while True:
            swept = await self.run_pass()
            total.dialogs_deleted += swept.dialogs_deleted
            total.utterances_deleted += swept.utterances_deleted
            total.dialogs_closed += swept.dialogs_closed
            total.utterances_compacted += swept.utterances_compacted
            if swept.round_done:
                total.round_done = True
                return total

    async def _sweep_forever(self) -> None:
        while True:
            try:
                swept = await self.run_pass()
            except StoreUnavailable as exc:
                log.warning("data lifecycle sweep skipped: %s", exc)
                swept = Swept(round_done=True)
            except Exception:  # a bug must not stop the agent, nor later passes
                log.exception("data lifecycle sweep failed")
                swept = Swept(round_done=True)
            # A round with work left goes on at once (other tasks run in between).
            await asyncio.sleep(self._interval if swept.round_done else 0)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
