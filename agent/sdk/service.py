"""Build a service from one decorated function.

    service = Service("greeting")

    @service.skill
    def greet(dialog: DialogView) -> list[SkillHypothesis]:
        return [SkillHypothesis(text="Hello!", confidence=0.9)]

    app = service.app   # FastAPI: POST /respond (a batch), GET /health

The agent posts ``{"dialogs": [view, ...]}``; the function is called once per dialog (in
order, async functions concurrently) and the answer is a JSON list, one item per dialog.
Sync functions run in a worker thread, as FastAPI runs sync endpoints, so a blocking model
call cannot stall the server.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from pydantic import BaseModel, TypeAdapter
from starlette.concurrency import run_in_threadpool

from agent.sdk.models import (
    DialogView,
    HypothesisView,
    Selection,
    ServiceRequest,
    SkillHypothesis,
    SkillSelection,
)
from agent.sdk.roles import Role, singular
from agent.sdk.tracing import TraceRequests, tracer_provider_from_env

Handler = Callable[..., Any]

_skill_output = TypeAdapter(list[SkillHypothesis])
_selector_output = TypeAdapter(list[str] | SkillSelection)


def _jsonable(value: Any) -> Any:
    """Pydantic models leave the service as plain JSON."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=False)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _normalise(role: Role, output: Any) -> Any:
    """Check the function kept its role's contract before anything leaves the service."""
    if role == "skills":
        if isinstance(output, SkillHypothesis):
            output = [output]
        return _jsonable(_skill_output.validate_python(output))
    if role == "skill_selectors":
        return _jsonable(_selector_output.validate_python(output))
    if role == "response_selectors":
        if isinstance(output, int):
            output = Selection(index=output)
        return _jsonable(Selection.model_validate(output))
    return _jsonable(output)


class Service:
    """One stateless microservice: a name, a role and the function that does the work."""

    def __init__(
        self, name: str, *, description: str = "", tracer_provider: TracerProvider | None = None
    ) -> None:
        self.name = name
        self.description = description
        #: Traces the service's requests, continuing the agent's trace; by default the
        #: standard ``OTEL_*`` variables decide (off unless they name an exporter).
        self.tracer_provider = tracer_provider
        self._role: Role | None = None
        self._handler: Handler | None = None
        self._app: FastAPI | None = None

    def _register(self, role: Role) -> Callable[[Handler], Handler]:
        def decorator(fn: Handler) -> Handler:
            if self._handler is not None:
                raise RuntimeError(f"service {self.name!r} already has a handler")
            self._role, self._handler = role, fn
            return fn

        return decorator

    @property
    def annotator(self) -> Callable[[Handler], Handler]:
        """``fn(dialog) -> JSON``: stored under ``annotations[<service name>]``."""
        return self._register("annotators")

    @property
    def skill(self) -> Callable[[Handler], Handler]:
        """``fn(dialog) -> list[SkillHypothesis]`` (or one): response candidates."""
        return self._register("skills")

    @property
    def candidate_annotator(self) -> Callable[[Handler], Handler]:
        """``fn(dialog, hypothesis) -> JSON``: called for every hypothesis of the turn."""
        return self._register("candidate_annotators")

    @property
    def skill_selector(self) -> Callable[[Handler], Handler]:
        """``fn(dialog) -> list[str] | SkillSelection``: the skills to run (and why)."""
        return self._register("skill_selectors")

    @property
    def response_selector(self) -> Callable[[Handler], Handler]:
        """``fn(dialog) -> Selection | int``: which hypothesis answers."""
        return self._register("response_selectors")

    async def _call(self, *args: Any) -> Any:
        assert self._handler is not None
        if inspect.iscoroutinefunction(self._handler):
            return await self._handler(*args)
        return await run_in_threadpool(self._handler, *args)

    async def _one(self, dialog: DialogView) -> Any:
        assert self._role is not None
        if self._role == "candidate_annotators":
            hypotheses: list[HypothesisView] = dialog.human_utterance.hypotheses
            outputs = [await self._call(dialog, h) for h in hypotheses]
            return _jsonable(outputs)
        return _normalise(self._role, await self._call(dialog))

    async def respond(self, request: ServiceRequest) -> list[Any]:
        """Answer a batch: one item per dialog, in the order received."""
        trace.get_current_span().set_attribute("chorus.batch_size", len(request.dialogs))
        return list(await asyncio.gather(*(self._one(d) for d in request.dialogs)))

    @property
    def app(self) -> FastAPI:
        """The FastAPI app: ``POST /respond`` and ``GET /health``."""
        if self._handler is None or self._role is None:
            raise RuntimeError(f"service {self.name!r} has no handler: decorate a function first")
        if self._app is None:
            self._app = build_app(self)
        return self._app


def build_app(service: Service) -> FastAPI:
    """Kept apart from :class:`Service` so the app is built once, on demand."""
    provider = service.tracer_provider or tracer_provider_from_env(service.name)
    owned = provider if service.tracer_provider is None else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if owned is not None:  # send the spans still buffered
            owned.shutdown()

    app = FastAPI(
        title=service.name, description=service.description or service.name, lifespan=lifespan
    )
    if provider is not None:
        app.add_middleware(TraceRequests, tracer=provider.get_tracer("chorus.sdk"))
    respond: Callable[[ServiceRequest], Awaitable[list[Any]]] = service.respond
    assert service._role is not None
    role = singular(service._role)
    app.post("/respond", summary=f"{role} {service.name}")(respond)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "service": service.name, "role": role}

    return app
