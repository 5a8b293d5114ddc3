"""The threads an in-process service's sync handler runs in, bounded per service.

A sync handler runs in a worker thread, off the event loop. A call given up at its timeout
is over for the turn, but not for its thread: Python cannot stop a thread, so it runs on
until the handler returns. A handler that hangs, or leaks memory each call, thus held one
more thread per turn without bound, and their memory with them (docs/performance.md,
"Figures behind the code's choices"). :class:`HandlerThreads` gives each service at most
``limit`` threads still running a call, timed out or not; past that, a call fails at once
as ``unavailable``, saying why, instead of starting another thread, until one of them ends.

A thread whose call has ended waits for the service's next call rather than ending: a
thread's start (its creation, and the wait until it runs) was the larger part of a sync
handler's cost in the agent, several calls a turn (docs/performance.md, "Half the CPU").
So a service holds at most ``limit`` threads, running or waiting, and a busy one keeps
them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

from agent.connectors.errors import ServiceUnavailable

#: Threads a service's sync handler may hold by default (the pipeline file's ``threads``).
DEFAULT_THREADS = 4


class HandlerThreads:
    """At most ``limit`` threads running ``service``'s sync handler at once. The threads
    are daemons: one hung for good must not keep the agent's process from exiting, as a
    ``ThreadPoolExecutor``'s threads would (they are joined at exit). One that has ended
    its call waits for the next (``_idle`` of them), so most calls start none."""

    def __init__(self, service: str, limit: int) -> None:
        self.service = service
        self.limit = limit
        self._running = 0
        self._idle = 0
        self._lock = threading.Lock()
        self._calls: queue.SimpleQueue[Callable[[], Callable[[], None]]] = queue.SimpleQueue()

    @property
    def running(self) -> int:
        """Calls whose thread has not ended, given up or not."""
        return self._running

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a thread, with the caller's context (its trace span), or
        :class:`ServiceUnavailable` when the service's threads are all still busy."""
        with self._lock:
            if self._running >= self.limit:
                raise ServiceUnavailable(
                    self.service,
                    f"its {self.limit} threads are all still running earlier calls (a call "
                    "given up at its timeout runs on in its thread: Python cannot stop one); "
                    "no call starts until one ends",
                )
            self._running += 1
            waiting = self._idle > 0  # a thread waits for a call: it takes this one
            if waiting:
                self._idle -= 1
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()

        def settle(result: Any, failure: BaseException | None) -> None:
            if answer.done():  # the call was given up
                return
            if failure is not None:
                answer.set_exception(failure)
            else:
                answer.set_result(result)

        def call() -> Callable[[], None]:
            """Runs the handler; returns how to hand its outcome to the caller."""
            result: Any = None
            failure: BaseException | None = None
            try:
                result = context.run(fn, *args)
            except BaseException as exc:  # SystemExit too: the connector contains it
                failure = exc

            def deliver() -> None:
                with contextlib.suppress(RuntimeError):  # the agent's loop has closed
                    loop.call_soon_threadsafe(settle, result, failure)

            return deliver

        if waiting:
            self._calls.put(call)
        else:
            try:
                threading.Thread(
                    target=self._work, args=(call,), name=f"chorus-{self.service}", daemon=True
                ).start()
            except BaseException:
                with self._lock:
                    self._running -= 1
                raise
        return await answer

    def _work(self, call: Callable[[], Callable[[], None]]) -> None:
        """A thread's life: its first call, then each next one the service is given. The
        call counts as ended before its caller hears of it."""
        while True:
            deliver = call()
            with self._lock:
                self._running -= 1
                self._idle += 1
            deliver()
            call = self._calls.get()
