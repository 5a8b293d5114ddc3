"""Collect concurrent calls to one service into batches of up to ``batch_size`` dialogs.

Calls made in the same event-loop iteration (many turns reaching the same stage at once)
share one HTTP request; a lone call is sent on the next iteration, so batching never makes
a turn wait for company.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent.connectors.base import Connector
from agent.sdk.models import DialogView

_Pending = tuple[DialogView, "asyncio.Future[tuple[Any, int]]"]


class Batcher:
    """Wraps a connector; :meth:`submit` answers one view and tells the batch's size."""

    def __init__(self, connector: Connector, batch_size: int) -> None:
        self.connector = connector
        self.batch_size = batch_size
        self._pending: list[_Pending] = []
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, view: DialogView) -> tuple[Any, int]:
        if self.batch_size == 1:
            (output,) = await self.connector.call([view])
            return output, 1
        future: asyncio.Future[tuple[Any, int]] = asyncio.get_running_loop().create_future()
        self._pending.append((view, future))
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

    async def _send(self, batch: list[_Pending]) -> None:
        try:
            outputs = await self.connector.call([view for view, _ in batch])
        except Exception as exc:  # delivered to every waiting caller, who records it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), output in zip(batch, outputs, strict=True):
            if not future.done():
                future.set_result((output, len(batch)))

    async def aclose(self) -> None:
        """Let batches in flight finish (their callers are waiting), then close."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.connector.aclose()
