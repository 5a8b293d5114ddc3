"""Collect concurrent calls to one service into batches of up to ``batch_size`` items.

Calls made in the same event-loop iteration (many turns reaching the same stage at once)
share one HTTP request; a lone call is sent on the next iteration, so batching never makes
a turn wait for company. :class:`Batches` does the collecting for any kind of item (a
Chorus dialog view, a dp-agent formatter's payload); :class:`Batcher` puts it in front of
a Chorus connector.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from agent.connectors.base import Connector
from agent.sdk.models import DialogView

Item = TypeVar("Item")


class Batches(Generic[Item]):
    """:meth:`submit` answers one item and tells how many shared its request; ``send``
    answers a list of items with a list of answers in the same order."""

    def __init__(
        self, send: Callable[[list[Item]], Awaitable[Sequence[Any]]], batch_size: int
    ) -> None:
        self.batch_size = batch_size
        self._send_batch = send
        self._pending: list[tuple[Item, asyncio.Future[tuple[Any, int]]]] = []
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, item: Item) -> tuple[Any, int]:
        future: asyncio.Future[tuple[Any, int]] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self.batch_size:
            self._flush()
        elif not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        while self._pending:
            batch = self._pending[: self.batch_size]
            del self._pending[: self.batch_size]
            task = asyncio.create_task(self._send(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[tuple[Item, asyncio.Future[tuple[Any, int]]]]) -> None:
        try:
            answers = await self._send_batch([item for item, _ in batch])
        except Exception as exc:  # delivered to every waiting caller, who records it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), answer in zip(batch, answers, strict=False):
            if not future.done():
                future.set_result((answer, len(batch)))

    async def drain(self) -> None:
        """Let batches in flight finish: their callers are waiting for them."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class Batcher:
    """Wraps a connector; :meth:`submit` answers one view and tells the batch's size."""

    def __init__(self, connector: Connector, batch_size: int) -> None:
        self.connector = connector
        self.batch_size = batch_size
        self._batches: Batches[DialogView] = Batches(connector.call, batch_size)

    async def submit(self, view: DialogView) -> tuple[Any, int]:
        if self.batch_size == 1:
            (output,) = await self.connector.call([view])
            return output, 1
        return await self._batches.submit(view)

    async def aclose(self) -> None:
        """Let batches in flight finish (their callers are waiting), then close."""
        await self._batches.drain()
        await self.connector.aclose()
