"""An in-process service's lifespan, held open by a task of its own.

:meth:`Service.lifespan <agent.sdk.service.Service.lifespan>` resources (the LLM skill's
HTTP client, a model) open when the agent starts and close when it stops. Waiting for them
without a bound had let one that never opened keep the agent from ever answering /ping,
and from stopping on SIGTERM (uvicorn acts on it once its start-up is over).
"""

from __future__ import annotations

import asyncio
import logging
import time

from agent.connectors.errors import ServiceUnavailable
from agent.connectors.loop_watch import Held, LoopWatch
from agent.sdk.service import Service

log = logging.getLogger("chorus.connectors")


class ServiceLifespan:
    """An in-process service's lifespan, held open by a task of its own.

    The task enters the service's resources, waits until the agent closes, and leaves them:
    entered and left in one task, as a resource made of task groups or cancel scopes needs.
    It is started at start-up and waited for at most the service's timeout, so a lifespan
    that never opens cannot hold the agent's start (nor a SIGTERM) for good; a call while
    it is still opening fails as ``unavailable`` at once, and a call after it failed starts
    it again and waits for it, within its own timeout."""

    def __init__(self, name: str, service: Service, timeout: float, watch: LoopWatch) -> None:
        self._name = name
        self._service = service
        self._timeout = timeout
        self._watch = watch
        self._task: asyncio.Task[None] | None = None
        self._opened: asyncio.Future[None] | None = None
        self._closing = asyncio.Event()
        self._since = 0.0

    def _start(self) -> asyncio.Future[None]:
        """The opening under way or done, or a new one if there is none or it failed."""
        opened = self._opened
        if opened is not None and not _failed(opened):
            return opened
        loop = asyncio.get_running_loop()
        opened = self._opened = loop.create_future()
        opened.add_done_callback(_retrieved)
        self._closing = asyncio.Event()
        self._since = time.perf_counter()

        async def keep() -> None:  # a lifespan that blocks the loop is named too
            await Held(self._keep(opened, self._closing), self._name, self._timeout, self._watch)

        self._task = asyncio.create_task(keep(), name=f"lifespan of {self._name}")
        return opened

    async def _keep(self, opened: asyncio.Future[None], closing: asyncio.Event) -> None:
        try:
            async with self._service.serving():
                opened.set_result(None)
                await closing.wait()
        except asyncio.CancelledError:
            if not opened.done():
                opened.cancel()
            raise
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            # An exit asked for by the service's code is its failure, not the agent's end.
            if opened.done():
                log.error(
                    "in-process service %s failed closing its lifespan", self._name, exc_info=exc
                )
                return
            log.error("in-process service %s could not open its lifespan", self._name, exc_info=exc)
            opened.set_exception(
                exc
                if isinstance(exc, Exception)
                else RuntimeError(f"{type(exc).__name__}{exc.args}")
            )

    async def open_at_start(self) -> None:
        opened = self._start()
        timeout = self._timeout
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(opened)
        except TimeoutError:
            log.warning(
                "in-process service %s: its lifespan has not opened within %gs (its timeout); "
                "the agent starts without waiting for it, and its calls fail as unavailable "
                "until it opens",
                self._name,
                timeout,
            )
        except Exception:  # logged by the task; the first call tries again
            pass

    async def ready(self) -> None:
        """Return once the lifespan is open, or raise :class:`ServiceUnavailable`."""
        opened = self._opened
        if (
            opened is not None
            and opened.done()
            and not opened.cancelled()
            and opened.exception() is None
        ):
            return
        if opened is not None and not opened.done():
            raise ServiceUnavailable(
                self._name,
                f"its lifespan is still opening ({time.perf_counter() - self._since:.1f}s "
                "so far): see the agent's log",
            )
        try:
            await asyncio.shield(self._start())
        except Exception as exc:
            raise ServiceUnavailable(
                self._name, f"its lifespan could not open: {type(exc).__name__}: {exc}"
            ) from None

    async def close(self) -> None:
        """Leave the resources (a lifespan still opening is given up)."""
        task, self._task, self._opened = self._task, None, None
        if task is None:
            return
        self._closing.set()
        if not task.done():
            done, _ = await asyncio.wait([task], timeout=self._timeout)
            if not done:
                task.cancel()
                await asyncio.wait([task])


def _retrieved(opened: asyncio.Future[None]) -> None:
    """Mark a failed opening's error as seen: the task logged it, a call reports it."""
    if not opened.cancelled():
        opened.exception()


def _failed(opened: asyncio.Future[None]) -> bool:
    return opened.done() and (opened.cancelled() or opened.exception() is not None)
