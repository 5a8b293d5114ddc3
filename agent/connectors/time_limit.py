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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

_LIMIT: ContextVar[asyncio.Timeout | None] = ContextVar("chorus_call_limit", default=None)


@asynccontextmanager
async def time_limit(seconds: float) -> AsyncIterator[None]:
    """``asyncio.timeout(seconds)`` (``TimeoutError`` when it runs out), known to the calls
    made inside it."""
    async with asyncio.timeout(seconds) as limit:
        token = _LIMIT.set(limit)
        try:
            yield
        finally:
            _LIMIT.reset(token)


def ran_out() -> bool:
    """Whether the time limit of the call running in this task has run out: a cancellation
    seen now is that limit's, the service's own timeout."""
    limit = _LIMIT.get()
    return limit is not None and limit.expired()
