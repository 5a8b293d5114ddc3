"""Collect concurrent calls to one service into batches of up to ``batch_size`` payloads.

Calls made in the same event-loop iteration (many turns reaching the same stage at once)
share one request; a lone call is sent on the next iteration, so batching never makes a
turn wait for company. Both kinds of pipeline call every service through a
:class:`Batcher`: a Chorus connector sends a batch as one ``{"dialogs": [...]}`` request,
a dp-agent one merges its formatters' payloads as dp-agent does.
"""

from __future__ import annotations

import asyncio
from typing import Any, Generic, TypeVar

from agent.connectors.base import Connector

Payload = TypeVar("Payload")


class Batcher(Generic[Payload]):
    """Wraps a connector; :meth:`submit` answers one payload and tells how many shared its
    request (for the turn's trace). A streamed call goes to :attr:`connector` alone."""

    def __init__(self, connector: Connector[Payload], batch_size: int) -> None:
        self.connector = connector
        self.batch_size = batch_size
        self._pending: list[tuple[Payload, asyncio.Future[tuple[Any, int]]]] = []
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, payload: Payload) -> tuple[Any, int]:
        if self.batch_size == 1:
            (output,) = await self.connector.call([payload])
            return output, 1
        future: asyncio.Future[tuple[Any, int]] = asyncio.get_running_loop().create_future()
        self._pending.append((payload, future))
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

    async def _send(self, batch: list[tuple[Payload, asyncio.Future[tuple[Any, int]]]]) -> None:
        try:
            answers = await self.connector.call([payload for payload, _ in batch])
        except Exception as exc:  # delivered to every waiting caller, who records it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), answer in zip(batch, answers, strict=False):
            if not future.done():
                future.set_result((answer, len(batch)))

    async def aclose(self) -> None:
        """Let batches in flight finish (their callers are waiting), then close."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.connector.aclose()
