"""A service built with the SDK, called in the agent's own process.

Over HTTP every call of a turn costs two processes' CPU (the agent's request and answer,
the service's server and parsing), and on a small machine the services of a stage take
turns on its cores: a turn's rule services cost more in hops than in their own work. A
pipeline entry ``"connector": {"module": "annotators.intents.app"}`` calls that module's
:class:`~agent.sdk.service.Service` directly instead. The service is the same code a
container runs, and it sees what it would over HTTP: each call gets its own copy of the
views, validated as the service's server validates a request (so a handler cannot change
the agent's state through the objects it is given), and the agent keeps its answer as JSON
values in containers of its own.

Its failures are recorded as they would be over HTTP: an ``HTTPException`` the handler
raises as the status it sets, a broken contract as a bad response; any other exception is
the agent's to log with its traceback (the service's code runs here). The service's
lifespan (:meth:`Service.lifespan`, e.g. the LLM skill's HTTP client) opens when the
agent starts and closes with it.

What it gives up is the isolation of a process: a handler that blocks or spends long on
the CPU holds every other turn, so this is for cheap services (rules, patterns, small
models) and for those that only wait on I/O (an LLM's endpoint). A sync handler runs in a
worker thread, as the SDK's server runs it.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python
from starlette.exceptions import HTTPException

from agent.connectors.base import Connector, Line
from agent.connectors.errors import BadServiceResponse, BadServiceStatus
from agent.sdk.contracts import ContractError
from agent.sdk.errors import ConfigError
from agent.sdk.models import DialogView, ServiceRequest
from agent.sdk.roles import Role, singular
from agent.sdk.service import Service

log = logging.getLogger("chorus.connectors")


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
    kind = "nothing" if found is None else f"a {type(found).__name__}"
    raise ServiceNotLoaded(
        f"{module_name}.{attribute} is {kind}, not a chorus Service "
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


def _as_sent(name: str, outputs: Any) -> Any:
    """The answer as JSON values, in containers of its own (the service keeps no handle
    on what the agent stores)."""
    try:
        return to_jsonable_python(outputs)
    except PydanticSerializationError as exc:
        raise BadServiceResponse(name, f"answer is not JSON: {exc}") from None


class InProcessConnector(Connector[DialogView]):
    """Calls one SDK service in this process (module docstring)."""

    def __init__(self, name: str, service: Service) -> None:
        self.name = name
        self.service = service
        self._serving: AsyncExitStack | None = None
        self._opening = asyncio.Lock()

    async def open(self) -> None:
        """Open the service's lifespan at start-up; when it fails, the first call tries
        again and its failure is that call's."""
        try:
            await self._open()
        except Exception:
            log.exception("in-process service %s could not open its lifespan", self.name)

    async def _open(self) -> None:
        """Open the service's lifespan once."""
        if self._serving is not None:
            return
        async with self._opening:
            if self._serving is None:
                stack = AsyncExitStack()
                await stack.enter_async_context(self.service.serving())
                self._serving = stack

    async def aclose(self) -> None:
        serving, self._serving = self._serving, None
        if serving is not None:
            await serving.aclose()

    @contextmanager
    def _as_over_http(self) -> Iterator[None]:
        """The handler's refusals as the service's server would have answered them."""
        try:
            yield
        except HTTPException as exc:
            body = json.dumps({"detail": exc.detail}, default=str)
            raise BadServiceStatus(self.name, exc.status_code, body) from None
        except ContractError as exc:
            raise BadServiceResponse(self.name, exc.message) from None

    @staticmethod
    def _request(views: list[DialogView]) -> ServiceRequest:
        """The views as the service would parse them, in containers of their own: a view
        shares its annotations and attributes with the turn's state."""
        return ServiceRequest.model_construct(
            dialogs=[DialogView.model_validate(view.model_dump()) for view in views]
        )

    async def call(self, views: list[DialogView]) -> list[Any]:
        await self._open()
        with self._as_over_http():
            outputs = await self.service.respond(self._request(views))
        return list(_as_sent(self.name, outputs))

    async def stream(self, view: DialogView) -> AsyncIterator[Line]:
        """A streaming skill's pieces as the lines it would send; any other service
        answers its end only."""
        if not self.service.streams:
            (output,) = await self.call([view])
            yield "end", output
            return
        await self._open()
        (dialog,) = self._request([view]).dialogs
        with self._as_over_http():
            async for kind, value in self.service.lines(dialog):
                yield kind, _as_sent(self.name, value) if kind == "end" else value
