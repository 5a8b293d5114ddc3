"""Stop calling a service that keeps failing, and retry a connection that never opened.

:class:`CircuitBreaker`: after ``threshold`` failures in a row the circuit opens and calls
fail at once (``unavailable``, "circuit open") instead of each waiting out a timeout; after
``reset_after`` seconds one trial call goes through: success closes the circuit, failure
opens it again. :class:`GuardedConnector` puts one in front of a connector, and retries a
call whose connection could not be opened (the request never reached the service, so a
retry cannot make it act twice), a bounded number of times. Every remote service of either
kind of pipeline is called through one (a dp-agent pipeline's with no retries, as dp-agent
makes none).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from agent.connectors.base import Connector, Line
from agent.connectors.errors import ServiceError, ServiceUnavailable, is_drop

log = logging.getLogger("chorus.connectors")

RETRY_DELAY = 0.05

Payload = TypeVar("Payload")


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        threshold: int,
        reset_after: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.threshold = threshold
        self.reset_after = reset_after
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_running = False
        #: times an in-process service held the event loop past its timeout
        self._loop_holds = 0

    @property
    def is_open(self) -> bool:
        return self._opened_at is not None

    def before_call(self) -> None:
        """Raise when the circuit is open and no trial call is due."""
        if self._opened_at is None:
            return
        waited = self._clock() - self._opened_at
        if waited < self.reset_after or self._trial_running:
            raise ServiceUnavailable(
                self.name,
                f"circuit open after {self._failures} failures in a row; next try "
                f"in {max(self.reset_after - waited, 0):.1f}s",
            )
        self._trial_running = True

    def record(self, ok: bool) -> None:
        self._trial_running = False
        if ok:
            if self._opened_at is not None:
                log.info("service %s answers again: circuit closed", self.name)
            self._failures, self._opened_at = 0, None
            return
        self._failures += 1
        if self.threshold and self._failures >= self.threshold:
            if self._opened_at is None:
                log.warning(
                    "service %s failed %d times in a row: circuit open for %.0fs",
                    self.name,
                    self._failures,
                    self.reset_after,
                )
            self._opened_at = self._clock()

    def held_loop(self) -> None:
        """An in-process service held the agent's event loop past its timeout: every other
        turn waited for it. The first time may be a one-off (a model loaded on the first
        call); from the second on, the circuit opens at once, whatever the threshold, so
        the service is not called again until a trial after ``reset_after`` seconds. The
        call's failure is recorded as any other (:meth:`record`)."""
        self._loop_holds += 1
        if self._loop_holds < 2:
            return
        log.warning(
            "service %s held the event loop again: circuit open for %.0fs",
            self.name,
            self.reset_after,
        )
        self._opened_at = self._clock()


class GuardedConnector(Connector[Payload]):
    """A connector behind a circuit breaker, with bounded retries of unopened connections."""

    def __init__(self, inner: Connector[Payload], breaker: CircuitBreaker, retries: int) -> None:
        self.name = inner.name
        self.inner = inner
        self.breaker = breaker
        self.retries = retries

    async def call(self, payloads: list[Payload]) -> list[Any]:
        self.breaker.before_call()
        attempt = 0
        while True:
            try:
                result = await self.inner.call(payloads)
            except ServiceUnavailable as exc:
                if exc.never_connected and attempt < self.retries:
                    attempt += 1
                    await asyncio.sleep(RETRY_DELAY * attempt)
                    continue
                self.breaker.record(ok=False)
                raise
            except ServiceError:
                self.breaker.record(ok=False)
                raise
            except asyncio.CancelledError as exc:
                if not is_drop(exc):
                    self.breaker.record(ok=False)  # a timeout from the executor counts too
                raise
            self.breaker.record(ok=True)
            return result

    async def stream(self, payload: Payload) -> AsyncIterator[Line]:
        """The inner connector's streamed answer, behind the breaker; no retries: a
        streamed call is made once."""
        self.breaker.before_call()
        ended = False
        try:
            async for kind, value in self.inner.stream(payload):
                if kind == "end":
                    ended = True
                    self.breaker.record(ok=True)
                yield kind, value
        except (ServiceError, asyncio.CancelledError, GeneratorExit) as exc:
            if not ended and not is_drop(exc):  # a stream given up before its end failed
                self.breaker.record(ok=False)
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def open(self) -> None:
        await self.inner.open()
