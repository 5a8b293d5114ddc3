"""Where an in-process service's sync handler runs: on the event loop once its calls have
shown it quick, in its threads (:mod:`agent.connectors.handler_threads`) otherwise.

A sync handler is run off the loop so that one which blocks (on a socket, a lock, a long
computation) does not hold every other turn. Most are rules and small models answering
in well under a millisecond, and for them the hand-off costs more than the call: the
thread is woken, the GIL passes to it and back, and the answer comes back through the
loop's thread-safe queue, several calls a turn (docs/performance.md, "Half the CPU").

So each service's calls are timed. They run in its threads until :data:`TRIAL_CALLS` in
a row have each returned within :data:`QUICK_CALL` (wall time, which in a thread includes
its waits for the GIL; a slower call, such as a first one loading a model, starts the
count again); the next ones are called on the loop, as an async handler is, under the
same watch (:mod:`agent.connectors.loop_watch`). The first call on the loop that takes
longer sends the service back to its threads for good: a handler that blocks now and
then holds the loop once at most. One that holds it past its timeout is a timeout and
counts for its breaker, as an async handler that holds the loop does.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from typing import Any

from agent.connectors.handler_threads import HandlerThreads

#: Calls a service's sync handler makes in its threads before it may run on the loop.
TRIAL_CALLS = 8
#: The longest call, in seconds, that leaves a handler quick: above it, it runs in its
#: threads from then on. Generous, because a call measured in a thread includes its waits
#: for the GIL (up to the interpreter's 5 ms switch interval each).
QUICK_CALL = 0.02


class SyncCalls:
    """Runs one service's sync handler, on the loop or in ``threads`` (module docstring)."""

    def __init__(self, threads: HandlerThreads) -> None:
        self.threads = threads
        #: quick calls in a row in the threads (a thread's race on it only delays)
        self._quick = 0
        #: a call on the loop was slow: the threads for good
        self._slow = False

    @property
    def inline(self) -> bool:
        """Whether the next call runs on the event loop."""
        return self._quick >= TRIAL_CALLS and not self._slow

    def _timed(self, took: float) -> None:
        self._quick = 0 if took > QUICK_CALL else self._quick + 1

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` with a copy of the caller's context, as in a thread: what the
        handler sets in its context stays in it."""
        if self.inline:
            started = time.perf_counter()
            try:
                return contextvars.copy_context().run(fn, *args)
            finally:
                if time.perf_counter() - started > QUICK_CALL:
                    self._slow = True
        return await self.threads.run(self._timing, fn, *args)

    def _timing(self, fn: Callable[..., Any], *args: Any) -> Any:
        """In the thread: the call, timed there (the wait for a free thread not counted)."""
        started = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self._timed(time.perf_counter() - started)
