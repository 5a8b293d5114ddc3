"""The updates ``chorus telegram`` has taken and not yet answered, and the offset that
acknowledges only what is done.

Users are answered independently: a user whose photo takes a minute to arrive holds their
own later messages (they are answered in order) and nobody else's, in this poll or the
next. So the bot does not wait for a whole batch before polling again; it polls while
answers are under way, and takes what is new.

What makes that safe is the offset. ``getUpdates`` with an offset acknowledges every
update before it for good, so the offset is the lowest update still under way (or past
the last one seen, when none is): an update is never acknowledged before it is answered,
and a restart answers what was under way. The Bot API sends the updates under way again
with each poll; they are known by their ``update_id`` and not taken twice. At most one
``getUpdates`` ``limit`` of updates lies between that offset and the newest taken, so
the work under way stays bounded however many wait, and a slow user holds others only
once that window is full of answered updates, for no longer than their own deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from agent.cli.telegram_updates import Message

log = logging.getLogger("chorus.telegram")

#: Answers one update (its id and message); its errors are its own, logged by the caller.
Answer = Callable[[int, Message], Awaitable[None]]


class Answering:
    """Updates under way: each user's in order, ``concurrency`` users at a time."""

    def __init__(self, answer: Answer, concurrency: int) -> None:
        self._answer = answer
        self._concurrency = concurrency
        self._queues: dict[int, deque[tuple[int, Message]]] = {}  # user -> their waiting
        self._ready: deque[int] = deque()  # users with messages and no worker yet
        self._open: set[int] = set()  # update ids taken, not yet answered
        self._done: set[int] = set()  # update ids answered, at or above the offset
        self._highest: int | None = None  # the newest update id seen
        self._workers: set[asyncio.Task[None]] = set()
        self._moved = asyncio.Event()  # the offset moved, or a worker failed
        self._failure: BaseException | None = None
        self._stopped = False  # cancelled: no worker starts any more

    @property
    def offset(self) -> int | None:
        """The next ``getUpdates`` offset: the lowest update under way, else past the
        newest seen (``None`` before any)."""
        if self._open:
            return min(self._open)
        return None if self._highest is None else self._highest + 1

    @property
    def busy(self) -> bool:
        return bool(self._open)

    def take(self, updates: list[tuple[int, Message]], highest: int) -> int:
        """Start answering the updates not seen before (``highest``: the poll's newest
        update id, answerable or not); how many were new."""
        floor = self.offset
        new = 0
        for update_id, message in updates:
            if (floor is not None and update_id < floor) or update_id in self._open:
                continue
            if update_id in self._done:
                continue
            assert message.sender is not None  # the channel takes only a user's messages
            user = message.sender.id
            queue = self._queues.get(user)
            if queue is None:
                queue = self._queues[user] = deque()
                self._ready.append(user)
            queue.append((update_id, message))
            self._open.add(update_id)
            new += 1
        self._highest = highest if self._highest is None else max(self._highest, highest)
        self._forget_done()
        self._staff()
        return new

    def _staff(self) -> None:
        """A worker for each user waiting, up to ``concurrency``."""
        while (
            self._ready
            and len(self._workers) < self._concurrency
            and self._failure is None
            and not self._stopped
        ):
            worker = asyncio.create_task(self._work())
            self._workers.add(worker)
            worker.add_done_callback(self._finished)

    async def wait(self, polled: int | None, room: int, interval: float) -> None:
        """Until every update taken is answered (the next poll may wait for news), the
        offset is ``room`` updates past ``polled`` (the last poll's: the next one sees that
        many more), or ``interval`` passes (a new user's message may wait behind a slow
        one); a worker's unexpected error is raised here. Polling at each step of the
        offset would ask the Bot API for the whole window again once per update."""
        try:
            async with asyncio.timeout(interval):
                while self._failure is None and self._open:
                    offset = self.offset
                    if polled is None or (offset is not None and offset - polled >= room):
                        break
                    self._moved.clear()
                    await self._moved.wait()
        except TimeoutError:
            pass
        self.check()

    def check(self) -> None:
        """Raise a worker's unexpected error (a bug): the bot stops, as it did before."""
        if self._failure is not None:
            raise self._failure

    async def finish(self) -> None:
        """Wait for the updates under way (each is bounded by its own timeouts)."""
        while self._workers:
            await asyncio.wait(set(self._workers))
        self.check()

    async def cancel(self) -> None:
        """Stop the updates under way (SIGTERM): they stay unacknowledged."""
        self._stopped = True
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)

    async def _work(self) -> None:
        while self._ready:
            user = self._ready.popleft()
            queue = self._queues[user]
            while queue:
                update_id, message = queue[0]
                await self._answer(update_id, message)
                queue.popleft()
                before = self.offset
                self._open.discard(update_id)
                self._done.add(update_id)
                if self.offset != before:
                    self._moved.set()
            del self._queues[user]

    def _finished(self, worker: asyncio.Task[None]) -> None:
        self._workers.discard(worker)
        if not worker.cancelled() and worker.exception() is not None:
            self._failure = worker.exception()
            self._moved.set()
        self._staff()  # a user queued after this worker's last look at the ready ones

    def _forget_done(self) -> None:
        floor = self.offset
        if floor is not None:
            self._done = {number for number in self._done if number >= floor}
