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

_LIMIT: ContextVar[asyncio.Timeout | None] = ContextVar("chorus_call_limit", default=None)


class time_limit:
    """``asyncio.timeout(seconds)`` (``TimeoutError`` when it runs out), known to the calls
    made inside it. A class rather than an ``asynccontextmanager``: the executor enters one
    per service call, and a generator's context manager costs more (docs/performance.md,
    "Half the CPU")."""

    __slots__ = ("_limit", "_token")

    def __init__(self, seconds: float) -> None:
        self._limit = asyncio.timeout(seconds)
        self._token: Token[asyncio.Timeout | None] | None = None

    async def __aenter__(self) -> None:
        await self._limit.__aenter__()
        self._token = _LIMIT.set(self._limit)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _LIMIT.reset(self._token)
        await self._limit.__aexit__(kind, error, trace)


def ran_out() -> bool:
    """Whether the time limit of the call running in this task has run out: a cancellation
    seen now is that limit's, the service's own timeout."""
    limit = _LIMIT.get()
    return limit is not None and limit.expired()
