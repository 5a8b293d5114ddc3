"""Where an in-process service's sync handler runs: in its threads
(:mod:`agent.connectors.handler_threads`), or on the event loop once its calls have shown
it quick, if its service promised that it never blocks.

A sync handler is run off the loop so that one which blocks (on a socket, a lock, a long
computation) does not hold every other turn. Most are rules and small models answering
in well under a millisecond, and for them the hand-off costs more than the call: the
thread is woken, the GIL passes to it and back, and the answer comes back through the
loop's thread-safe queue, several calls a turn (docs/performance.md, "Half the CPU").

Quick calls cannot tell a handler that never blocks from one that blocks on its ninth
call (a socket without a timeout, a deadlock), and on the loop the second would hold
every turn of the agent for good. So the loop is only for a service whose author says
so (``Service(..., never_blocks=True)``); any other sync handler stays in its threads,
where a call that never returns costs its own service's calls only.

For those that may, each service's calls are timed. They run in its threads until
:data:`TRIAL_CALLS` in a row have each been quick: under :data:`QUICK_CPU` of the CPU (a
handler whose own work is longer saves little by skipping the hand-off, and would hold
every other turn while it works) and back within :data:`QUICK_CALL` (a handler that
waits, on a socket or a lock, is not quick however little CPU it uses). A slower call,
such as a first one loading a model, starts the count again. The next ones are called on
the loop, as an async handler is, under the same watch
(:mod:`agent.connectors.loop_watch`). A call on the loop that is not quick sends the
service back to its threads, for a trial twice as long as the last: a handler that blocks
each time holds the loop a handful of times in its life, while one that ran long only
because a busy machine left the agent waiting for a core comes back. One that holds the
loop past its timeout is a timeout and counts for its breaker, as an async handler that
holds the loop does.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from typing import Any

from agent.connectors.handler_threads import HandlerThreads

#: Calls a service's sync handler makes in its threads before it may run on the loop.
TRIAL_CALLS = 8
#: The most CPU time, in seconds, a quick call uses (its thread's own, from
#: ``time.thread_time``).
QUICK_CPU = 0.0005
#: The longest call, in seconds, that counts as quick. Generous, because a call measured
#: in a thread includes its waits for the GIL (up to the interpreter's 5 ms switch
#: interval each).
QUICK_CALL = 0.02
#: The longest trial: after a slow call on the loop, each trial is twice the last, up to it.
LONGEST_TRIAL = 1 << 20


class SyncCalls:
    """Runs one service's sync handler, on the loop or in ``threads`` (module docstring)."""

    def __init__(self, threads: HandlerThreads, *, may_inline: bool = False) -> None:
        self.threads = threads
        #: whether the service promised its handler never blocks (module docstring)
        self.may_inline = may_inline
        #: quick calls in a row in the threads (a thread's race on it only delays)
        self._quick = 0
        #: the quick calls in a row that bring the handler to the loop
        self.trial = TRIAL_CALLS

    @property
    def inline(self) -> bool:
        """Whether the next call runs on the event loop."""
        return self._quick >= self.trial

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` with a copy of the caller's context, as in a thread: what the
        handler sets in its context stays in it."""
        if not self.may_inline:
            return await self.threads.run(fn, *args)
        if self.inline:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return contextvars.copy_context().run(fn, *args)
            finally:
                if not _quick(started, cpu):
                    self._quick = 0
                    self.trial = min(self.trial * 2, LONGEST_TRIAL)
        return await self.threads.run(self._timing, fn, *args)

    def _timing(self, fn: Callable[..., Any], *args: Any) -> Any:
        """In the thread: the call, timed there (the wait for a free thread not counted)."""
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args)
        finally:
            self._quick = min(self._quick + 1, self.trial) if _quick(started, cpu) else 0


def _quick(started: float, cpu: float) -> bool:
    """Whether the call begun at ``started`` (and at ``cpu`` of its thread's CPU time) was."""
    return time.thread_time() - cpu <= QUICK_CPU and time.perf_counter() - started <= QUICK_CALL
