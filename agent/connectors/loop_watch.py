"""Which in-process service holds the event loop, and a watchdog that names it as it does.

A service called in the agent's process runs its async handler on the agent's event loop:
while a step of it runs (the code between two awaits), nothing else does, not another
user's turn, not ``/ping``. The agent cannot take the loop back from code that never
awaits, but it can tell who holds it. :class:`Held` drives a handler's coroutine one step
at a time and marks the loop's thread with the service's name for each step, so

- the :class:`LoopWatch` thread, which looks at the marks a few times a second, logs a
  warning naming the service as soon as one step has held the loop past the service's
  timeout, while it still holds it (the log says who, not only that the agent was slow);
- the connector learns how long the longest step held the loop, and so whether the call
  blocked (:attr:`Held.longest`), to refuse its output and open its circuit.

Marking costs an assignment per step; the watchdog wakes every :data:`WATCH_INTERVAL`
seconds only while an in-process service is open.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger("chorus.connectors")

#: How often the watchdog looks at the marks: a block is named within this of its start
#: passing the service's timeout.
WATCH_INTERVAL = 0.05

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class _Step:
    """One step of a service's handler running on a loop's thread."""

    service: str
    bound: float
    since: float = field(default_factory=time.perf_counter)
    named: bool = False


class LoopWatch:
    """The steps running on each loop's thread, and the watchdog thread that reads them."""

    def __init__(self, interval: float = WATCH_INTERVAL) -> None:
        self.interval = interval
        #: the step running on each thread's loop (one at a time per thread), by thread id
        self._running: dict[int, _Step] = {}
        self._users = 0
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None

    def attach(self) -> None:
        """One more open in-process service: the watchdog runs while there is one."""
        with self._lock:
            self._users += 1
            if self._stop is None:
                self._stop = threading.Event()
                threading.Thread(
                    target=self._watch, args=(self._stop,), name="chorus-loop-watch", daemon=True
                ).start()

    def detach(self) -> None:
        with self._lock:
            self._users = max(self._users - 1, 0)
            if self._users == 0 and self._stop is not None:
                self._stop.set()
                self._stop = None

    def begin(self, service: str, bound: float) -> _Step:
        step = _Step(service, bound)
        self._running[threading.get_ident()] = step
        return step

    def end(self, step: _Step) -> float:
        """How long the step held the loop."""
        self._running.pop(threading.get_ident(), None)
        return time.perf_counter() - step.since

    def _watch(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            now = time.perf_counter()
            for step in list(self._running.values()):
                held = now - step.since
                if not step.named and held > step.bound:
                    step.named = True
                    log.warning(
                        "in-process service %s has held the event loop for %.1fs, past its "
                        "%gs timeout: no other turn, nor /ping, runs until its handler "
                        "awaits (a blocking call in an async handler: make the handler sync "
                        "or run the service over HTTP)",
                        step.service,
                        held,
                        step.bound,
                    )


#: The agent's one watch: every loop of the process is marked in it.
WATCH = LoopWatch()


class Held(Awaitable[T]):
    """Await ``coroutine`` one step at a time, each step marked as ``service``'s in
    ``watch``; :attr:`longest` is the longest step, in seconds, once awaited."""

    __slots__ = ("_coroutine", "bound", "longest", "service", "watch")

    def __init__(
        self,
        coroutine: Coroutine[Any, Any, T],
        service: str,
        bound: float,
        watch: LoopWatch = WATCH,
    ) -> None:
        self._coroutine = coroutine
        self.service = service
        self.bound = bound
        self.watch = watch
        self.longest = 0.0

    def __await__(self) -> Generator[Any, Any, T]:
        coroutine = self._coroutine
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            step = self.watch.begin(self.service, self.bound)
            try:
                yielded = coroutine.send(sent) if thrown is None else coroutine.throw(thrown)
            except StopIteration as stop:
                result: T = stop.value
                return result
            finally:
                self.longest = max(self.longest, self.watch.end(step))
                thrown = None
            try:
                sent = yield yielded
            except BaseException as exc:  # a cancellation, passed on into the handler
                thrown, sent = exc, None
