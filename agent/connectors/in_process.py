"""A service built with the SDK, called in the agent's own process.

Over HTTP every call of a turn costs two processes' CPU (the agent's request and answer,
the service's server and parsing), and on a small machine the services of a stage take
turns on its cores: a turn's rule services cost more in hops than in their own work. A
pipeline entry ``"connector": {"module": "annotators.intents.app"}`` calls that module's
:class:`~agent.sdk.service.Service` directly instead. The service is the same code a
container runs, and it sees what it would over HTTP: each call gets its own copy of the
views, validated as the service's server validates a request (so a handler cannot change
the agent's state through the objects it is given), unless its service promises to only
read them (``Service(..., never_changes_view=True)``, as the shipped ones do): it is then
shown the turn's views themselves, its promise checked on a few calls
(:mod:`agent.connectors.shared_views`). The agent keeps its answer as JSON values in
containers of its own.

Its failures are recorded as they would be over HTTP: an ``HTTPException`` the handler
raises as the status it sets, a broken contract as a bad response; any other exception is
the agent's to log with its traceback (the service's code runs here). The service's
lifespan (:meth:`Service.lifespan`, e.g. the LLM skill's HTTP client) opens when the
agent starts and closes with it.

What it gives up is the isolation of a process: a handler that blocks or spends long on
the CPU holds every other turn, so this is for cheap services (rules, patterns, small
models) and for those that only wait on I/O (an LLM's endpoint). The agent cannot take the
loop back from an async handler that blocks, but it bounds what one costs:

- the watchdog of :mod:`agent.connectors.loop_watch` names the service in the log while it
  holds the loop past its timeout;
- a call that took longer than its timeout is a timeout, its late answer not used;
- a service that held the loop a second time has its circuit opened at once
  (:meth:`~agent.connectors.breaker.CircuitBreaker.held_loop`): it is not called until
  a trial after ``breaker_reset`` seconds.

A sync handler runs in a worker thread, as the SDK's server runs it, but in one of at most
``threads`` per service (:mod:`agent.connectors.handler_threads`): a thread cannot be
stopped at a timeout. If its service promises that it never blocks
(``Service(..., never_blocks=True)``), it is called on the loop instead once its calls have
shown it quick (:mod:`agent.connectors.quick_calls`), and back in its threads for a while
after a slow call there. A handler that raises ``SystemExit`` or ``KeyboardInterrupt`` fails
its call (over HTTP it would have ended its own server, not the agent). A streamed answer
hands the loop back every few pieces and is bounded in size as over HTTP. A lifespan that
does not open within the service's timeout goes on opening while the agent serves; its
calls fail as ``unavailable`` meanwhile.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing, contextmanager
from typing import Any

from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python
from starlette.exceptions import HTTPException

from agent.connectors.base import Connector, Line
from agent.connectors.breaker import CircuitBreaker
from agent.connectors.errors import (
    BadServiceResponse,
    BadServiceStatus,
    ServiceTimeout,
)
from agent.connectors.handler_threads import DEFAULT_THREADS, HandlerThreads
from agent.connectors.http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    YIELD_EVERY_BYTES,
    YIELD_EVERY_LINES,
)
from agent.connectors.lifespan import ServiceLifespan
from agent.connectors.loop_watch import WATCH, Held, LoopWatch
from agent.connectors.quick_calls import SyncCalls
from agent.connectors.shared_views import SharedViews
from agent.sdk.contracts import ContractError
from agent.sdk.errors import ConfigError
from agent.sdk.models import DialogView
from agent.sdk.roles import Role, singular
from agent.sdk.service import Service
from agent.sdk.streaming import LineKey, line

log = logging.getLogger("chorus.connectors")

#: Seconds a call may take by default (the pipeline file's ``timeout``).
DEFAULT_TIMEOUT = 2.0
#: What a streamed piece's line costs over HTTP besides its text, in bytes.
_TOKEN_LINE_BYTES = len(line("token", ""))


class ServiceNotLoaded(ConfigError):
    """The module named for an in-process service cannot give one; the message says why
    (the pipeline names the entry: :class:`~agent.pipeline.config.PipelineConfigError`)."""


def find_service(target: str, role: Role) -> Service | Callable[[], object]:
    """What ``target`` names (``package.module`` or ``package.module:name``, the name
    ``service`` by default): a :class:`Service`, checked to play ``role``, or a function
    that makes one. Only the module is imported: a factory is not called."""
    module_name, _, attribute = target.partition(":")
    attribute = attribute or "service"
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ServiceNotLoaded(f"cannot import {module_name!r}: {exc}") from None
    found = getattr(module, attribute, None)
    if isinstance(found, Service):
        return _checked(found, f"{module_name}.{attribute}", role)
    if callable(found):
        factory: Callable[[], object] = found
        return factory
    what = "nothing" if found is None else f"a {type(found).__name__}"
    raise ServiceNotLoaded(
        f"{module_name}.{attribute} is {what}, not a chorus Service "
        "(service = Service(...) with a decorated handler) or a function that makes one"
    )


def load_service(target: str, role: Role) -> Service:
    """The :class:`Service` ``target`` names (:func:`find_service`), a factory called now:
    a service whose settings come from the environment (the LLM skill) reads them when
    the agent starts, not when its module was first imported."""
    found = find_service(target, role)
    if isinstance(found, Service):
        return found
    made = found()
    if not isinstance(made, Service):
        raise ServiceNotLoaded(f"{target} made a {type(made).__name__}, not a chorus Service")
    return _checked(made, target, role)


def _checked(service: Service, where: str, role: Role) -> Service:
    if service.role is None:
        raise ServiceNotLoaded(f"{where} has no handler: decorate a function")
    if service.role != role:
        raise ServiceNotLoaded(
            f"{where} is a {singular(service.role)} service, but the pipeline lists it "
            f"under {role}: move it to its group or name another module"
        )
    return service


def _as_sent(name: str, outputs: Any, max_bytes: int) -> Any:
    """The answer as JSON values, in containers of its own (the service keeps no handle
    on what the agent stores), refused when its JSON is over ``max_bytes``, as the HTTP
    connector refuses it: measured first (pydantic's serializer, cheap), so a flood is not
    copied value by value on the loop, which held it for seconds, before the storage bounds
    refuse it (docs/performance.md, "Figures behind the code's choices")."""
    try:
        size = len(to_json(outputs))
        if size > max_bytes:
            raise BadServiceResponse(name, f"answer of {size} bytes is over the {max_bytes} limit")
        return to_jsonable_python(outputs)
    except PydanticSerializationError as exc:
        raise BadServiceResponse(name, f"answer is not JSON: {exc}") from None


class InProcessConnector(Connector[DialogView]):
    """Calls one SDK service in this process (module docstring). ``breaker`` is the
    circuit breaker in front of it, told when the service held the event loop."""

    def __init__(
        self,
        name: str,
        service: Service,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        threads: int = DEFAULT_THREADS,
        breaker: CircuitBreaker | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        watch: LoopWatch = WATCH,
    ) -> None:
        self.name = name
        self.service = service
        self.timeout = timeout
        self.threads = HandlerThreads(name, threads)
        self.sync = SyncCalls(self.threads, may_inline=service.never_blocks)
        self.views = SharedViews(name, promised=service.never_changes_view)
        self._async = service.is_async
        self.breaker = breaker
        self._max_bytes = max_response_bytes
        self._watch = watch
        self._watched = False
        self._lifespan = ServiceLifespan(name, service, timeout, watch)

    async def open(self) -> None:
        """Open the service's lifespan at start-up, waiting for it at most the service's
        timeout: one still opening then goes on opening while the agent serves (its calls
        fail as unavailable meanwhile); one that failed is opened again by the next call."""
        if not self._watched:
            self._watched = True
            self._watch.attach()
        await self._lifespan.open_at_start()

    async def aclose(self) -> None:
        await self._lifespan.close()
        if self._watched:
            self._watched = False
            self._watch.detach()

    @contextmanager
    def _as_over_http(self) -> Iterator[None]:
        """The handler's refusals as the service's server would have answered them; an
        exit it asks for as its call's failure (over HTTP it would end its own server, at
        most: here it would end the agent and every user's turn)."""
        try:
            yield
        except HTTPException as exc:
            body = json.dumps({"detail": exc.detail}, default=str)
            raise BadServiceStatus(self.name, exc.status_code, body) from None
        except ContractError as exc:
            raise BadServiceResponse(self.name, exc.message) from None
        except (SystemExit, KeyboardInterrupt) as exc:
            log.error("in-process service %s asked to exit: contained", self.name, exc_info=exc)
            raise BadServiceResponse(
                self.name,
                f"its handler raised {type(exc).__name__}({', '.join(map(repr, exc.args))}), "
                "which would have ended the agent",
            ) from None

    def _shown(self, views: list[DialogView]) -> tuple[list[DialogView], list[Any] | None]:
        """What the service is shown (:mod:`agent.connectors.shared_views`): the views
        themselves when it promised not to change them and its handler runs on the loop
        for one dialog, else copies."""
        on_loop = len(views) == 1 and (self._async or self.sync.inline)
        return self.views.shown(views, on_loop=on_loop)

    async def _answer(self, dialog: DialogView) -> Any:
        """One dialog's answer; in a task of its own for a batch, so an exit is contained
        in it (a task that ends with ``SystemExit`` stops the event loop)."""
        with self._as_over_http():
            return await self.service.answer(dialog, self.sync.run)

    async def call(self, views: list[DialogView]) -> list[Any]:
        await self._lifespan.ready()
        dialogs, checked = self._shown(views)
        steps = [Held(self._answer(d), self.name, self.timeout, self._watch) for d in dialogs]
        started = time.perf_counter()
        try:
            # one dialog, the usual batch: no task to gather
            outputs = [await steps[0]] if len(steps) == 1 else await asyncio.gather(*steps)
        finally:  # a cancellation on its way goes on; the breaker hears of the hold
            longest = self._held(max(step.longest for step in steps))
            self.views.check(dialogs, checked)
        self._in_time(started, longest)
        return list(_as_sent(self.name, outputs, self._max_bytes))

    def _held(self, longest: float) -> float:
        """Tell the breaker when a call held the event loop past its timeout."""
        if longest > self.timeout and self.breaker is not None:
            self.breaker.held_loop()
        return longest

    def _in_time(self, started: float, longest: float) -> None:
        """A call that answered after its timeout is a timeout, its answer not used: the
        timer could not fire while the loop was held (by this service or another)."""
        if longest > self.timeout:
            raise ServiceTimeout(
                self.name,
                f"held the event loop for {longest:.1f}s, past its {self.timeout:g}s "
                "timeout (a blocking call in an async handler): its answer is not used",
            )
        took = time.perf_counter() - started
        if took > self.timeout:
            raise ServiceTimeout(
                self.name,
                f"answered after {took:.1f}s, past its {self.timeout:g}s timeout: "
                "its answer is not used",
            )

    async def stream(self, view: DialogView) -> AsyncIterator[Line]:
        """A streaming skill's pieces as the lines it would send; any other service
        answers its end only. The loop is handed back every few pieces, and an answer
        over the HTTP connector's size bound is refused as it would be over HTTP."""
        if not self.service.streams:
            (output,) = await self.call([view])
            yield "end", output
            return
        await self._lifespan.ready()
        shown, checked = self._shown([view])
        dialog = shown[0]
        try:
            started = time.perf_counter()
            longest = 0.0
            size = pieces = since_bytes = 0
            async with aclosing(self.service.lines(dialog)) as lines:
                while True:
                    step = Held(_next(lines), self.name, self.timeout, self._watch)
                    try:
                        with self._as_over_http():
                            got = await step
                    finally:
                        longest = max(longest, self._held(step.longest))
                    if got is None:
                        break
                    key, value = got
                    if key == "end":
                        self._in_time(started, longest)
                        yield key, _as_sent(self.name, value, self._max_bytes)
                        return
                    if key == "token":
                        size += len(value) + _TOKEN_LINE_BYTES
                        since_bytes += len(value) + _TOKEN_LINE_BYTES
                        if size > self._max_bytes:
                            raise BadServiceResponse(
                                self.name, f"answer is over the {self._max_bytes} bytes limit"
                            )
                    pieces += 1
                    if pieces >= YIELD_EVERY_LINES or since_bytes >= YIELD_EVERY_BYTES:
                        pieces = since_bytes = 0
                        await asyncio.sleep(0)  # other users' requests run between pieces
                    yield key, value
            raise BadServiceResponse(self.name, "the streamed answer ended without its end line")
        finally:
            self.views.check(shown, checked)


async def _next(lines: AsyncIterator[tuple[LineKey, Any]]) -> tuple[LineKey, Any] | None:
    """The next line, or None at the end (a coroutine, for :class:`Held` to step)."""
    try:
        return await anext(lines)
    except StopAsyncIteration:
        return None
