"""Stop calling a service that keeps failing, and retry a connection that never opened.

:class:`CircuitBreaker`: after ``threshold`` failures in a row the circuit opens and calls
fail at once (``unavailable``, "circuit open") instead of each waiting out a timeout; after
``reset_after`` seconds one trial call goes through: success closes the circuit, failure
opens it again, and a trial that ends saying nothing about the service (below) leaves the
next call to be the trial. :class:`GuardedConnector` puts one in front of a connector, and retries a
call whose connection could not be opened (the request never reached the service, so a
retry cannot make it act twice), a bounded number of times. Every remote service of either
kind of pipeline is called through one (a dp-agent pipeline's with no retries, as dp-agent
makes none).

Only what says something about the service counts as a failure: a :class:`ServiceError`
(its error status, a broken answer, no connection, its connector's own timeout) or the
call's own time limit running out (:mod:`agent.connectors.time_limit`). A call cancelled
for any other reason (a cheaper skill answered first, the user's next message interrupted
the turn, the turn's deadline passed, the agent stops), a stream the agent closed early, or
a bug in the agent's own code ends with no verdict: it neither opens nor closes the circuit,
and a trial that ends so frees its place for the next call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from agent.connectors.base import Connector, Line
from agent.connectors.errors import ServiceError, ServiceUnavailable
from agent.connectors.time_limit import ran_out

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

    def before_call(self) -> bool:
        """Raise when the circuit is open and no trial call is due; True when this call is
        the trial, whose end must be recorded or released (:meth:`release`)."""
        if self._opened_at is None:
            return False
        waited = self._clock() - self._opened_at
        if waited < self.reset_after or self._trial_running:
            raise ServiceUnavailable(
                self.name,
                f"circuit open after {self._failures} failures in a row; next try "
                f"in {max(self.reset_after - waited, 0):.1f}s",
            )
        self._trial_running = True
        return True

    def release(self) -> None:
        """The trial call ended with no verdict on the service: the circuit stays open,
        and the next call is the trial."""
        self._trial_running = False

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


def _the_services(exc: BaseException) -> bool:
    """Whether ``exc`` says something about the service: a service error, or the call's
    own time limit running out (module docstring)."""
    return isinstance(exc, ServiceError) or (isinstance(exc, asyncio.CancelledError) and ran_out())


class _Verdict:
    """What one guarded call says about its service, recorded at most once; a trial call
    that ends without one frees the trial for the next call."""

    def __init__(self, breaker: CircuitBreaker) -> None:
        self.breaker = breaker
        self.trial = breaker.before_call()
        self.given = False

    def record(self, ok: bool) -> None:
        if not self.given:
            self.given = True
            self.breaker.record(ok)

    def failed_by(self, exc: BaseException) -> None:
        """Record a failure when ``exc`` is the service's (:func:`_the_services`)."""
        if _the_services(exc):
            self.record(ok=False)

    def close(self) -> None:
        if self.trial and not self.given:
            self.breaker.release()


class GuardedConnector(Connector[Payload]):
    """A connector behind a circuit breaker, with bounded retries of unopened connections."""

    def __init__(self, inner: Connector[Payload], breaker: CircuitBreaker, retries: int) -> None:
        self.name = inner.name
        self.inner = inner
        self.breaker = breaker
        self.retries = retries

    async def call(self, payloads: list[Payload]) -> list[Any]:
        """The inner connector's answer, its verdict given to the breaker: what
        :class:`_Verdict` does for a stream, written out (and the first attempt made
        here), as every service call of every turn comes through here."""
        breaker = self.breaker
        # a closed circuit with no failure counted, as nearly every call finds it, is
        # read here, and left as it is by a success: no call of the breaker's for either
        trial = breaker.before_call() if breaker._opened_at is not None else False
        try:
            try:
                result = await self.inner.call(payloads)
            except ServiceUnavailable as exc:
                if not exc.never_connected or self.retries <= 0:
                    raise
                result = await self._retried(payloads, 1)
        except BaseException as exc:
            if _the_services(exc):
                breaker.record(ok=False)
            elif trial:  # no verdict: the next call is the trial
                breaker.release()
            raise
        if trial or breaker._failures or breaker._opened_at is not None:
            breaker.record(ok=True)
        return result

    async def _retried(self, payloads: list[Payload], attempt: int) -> list[Any]:
        """Attempts from ``attempt`` on, after a connection that never opened, each after
        a longer pause, until one connects or ``retries`` have been made."""
        while True:
            await asyncio.sleep(RETRY_DELAY * attempt)
            try:
                return await self.inner.call(payloads)
            except ServiceUnavailable as exc:
                if not exc.never_connected or attempt >= self.retries:
                    raise
            attempt += 1

    async def stream(self, payload: Payload) -> AsyncIterator[Line]:
        """The inner connector's streamed answer, behind the breaker; no retries: a
        streamed call is made once. The inner stream is closed with this one, so a stream
        the agent stops reading (a dropped skill, one cut at its token allowance) closes
        its connection at once."""
        verdict = _Verdict(self.breaker)
        lines = self.inner.stream(payload)
        try:
            async for key, value in lines:
                if key == "end":
                    verdict.record(ok=True)
                yield key, value
        except BaseException as exc:
            verdict.failed_by(exc)
            raise
        finally:
            verdict.close()
            close = getattr(lines, "aclose", None)  # an async generator's, as they all are
            if close is not None:
                await close()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def open(self) -> None:
        await self.inner.open()
