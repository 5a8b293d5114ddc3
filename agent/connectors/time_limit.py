"""A call's own time limit, as the circuit breaker must tell it from other cancellations.

The executor gives each service call ``connector.timeout`` seconds through
:func:`time_limit` (an ``asyncio.timeout``). When it runs out, the call is cancelled, and so
it is when a cheaper skill answered first, the user's next message interrupts the turn,
the turn's deadline passes or the agent stops: the breaker sees the same
``CancelledError`` each time. Only the first says something about the service (it did not
answer in its time); :func:`ran_out` tells it apart, from the limit the call runs under.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar, Token
from types import TracebackType

_LIMIT: ContextVar[time_limit | None] = ContextVar("chorus_call_limit", default=None)


class time_limit:
    """``asyncio.timeout(seconds)`` (``TimeoutError`` when it runs out), known to the calls
    made inside it. A class of its own rather than one wrapping ``asyncio.Timeout``: the
    executor enters one per service call, and ``asyncio.Timeout``'s states and
    rescheduling, which a call's fixed limit never uses, were several frames of each
    call (docs/performance.md, "Half the CPU"). It cancels the task as ``asyncio.Timeout``
    does, and tells its own cancellation from any other the same way (the task's
    ``cancelling`` count), so a call cut short by something else is not a timeout."""

    __slots__ = ("_cancelling", "_expired", "_handle", "_seconds", "_task", "_token", "deadline")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        #: when the limit runs out, in the loop's time (once entered)
        self.deadline = float("inf")
        self._expired = False
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._token: Token[time_limit | None] | None = None

    def __enter__(self) -> None:
        """Entered as a plain ``with`` inside the task: nothing in it awaits, and the
        executor enters one per service call (no coroutine made to enter and leave it)."""
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("time_limit should be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        loop = asyncio.get_running_loop()
        self.deadline = loop.time() + self._seconds
        self._handle = loop.call_at(self.deadline, self._on_timeout)
        self._token = _LIMIT.set(self)

    async def __aenter__(self) -> None:
        self.__enter__()

    def _on_timeout(self) -> None:
        assert self._task is not None
        self._task.cancel()
        self._expired = True
        self._handle = None

    def expired(self) -> bool:
        """Whether the limit ran out (and cancelled the call)."""
        return self._expired

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.__exit__(kind, error, trace)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _LIMIT.reset(self._token)
            self._token = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if (
            self._expired
            and self._task is not None
            and self._task.uncancel() <= self._cancelling
            and kind is asyncio.CancelledError
        ):
            # no other cancellation came meanwhile: this one is the limit's
            raise TimeoutError from error


def bounded_by(deadline: float) -> bool:
    """Whether the call running in this task is cut off by its time limit by ``deadline``
    (the loop's time) at the latest: then a transport needs no timer of its own for it.
    Only a limit of this very task counts: a task started inside a limited call (a batch's
    request, sent from a task of the batcher's) inherits the variable, not the limit's
    cancellation."""
    limit = _LIMIT.get()
    return (
        limit is not None and limit.deadline <= deadline and limit._task is asyncio.current_task()
    )


def ran_out() -> bool:
    """Whether the time limit of the call running in this task has run out: a cancellation
    seen now is that limit's, the service's own timeout."""
    limit = _LIMIT.get()
    return limit is not None and limit.expired()
