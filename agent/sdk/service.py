"""Build a service from one decorated function.

    service = Service("greeting")

    @service.skill
    def greet(dialog: DialogView) -> list[SkillHypothesis]:
        return [SkillHypothesis(text="Hello!", confidence=0.9)]

    app = service.app   # FastAPI: POST /respond (a batch), GET /health

The agent posts ``{"dialogs": [view, ...]}``; the function is called once per dialog (in
order, async functions concurrently) and the answer is a JSON list, one item per dialog.
Sync functions run in a worker thread, as FastAPI runs sync endpoints, so a blocking model
call cannot stall the server. A skill may be an async generator that streams its text
(:mod:`agent.sdk.streaming` has the wire format):

    @service.skill
    async def tell(dialog: DialogView) -> AsyncIterator[StreamStart | str]:
        yield StreamStart(confidence=0.8)
        async for piece in model.stream(dialog):
            yield piece

The contract is checked at both ends (agent/sdk/contracts.py): a function its role cannot
call is refused when it is decorated, so the service fails at import naming it; an answer
outside the role's shape is a 500 carrying pydantic's words, which the agent records as the
service's ``bad_response``. ``agent.sdk.testing`` calls a service in-process for its tests.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool

from agent.sdk.contracts import (
    CONTRACT_HEADER,
    AnnotatorHandler,
    CandidateAnnotatorHandler,
    ContractError,
    ResponseSelectorHandler,
    SkillHandler,
    SkillSelectorHandler,
    check_signature,
    describe_validation,
    handler_name,
)
from agent.sdk.models import (
    DialogView,
    HypothesisView,
    Selection,
    ServiceRequest,
    SkillHypothesis,
    SkillSelection,
)
from agent.sdk.roles import Role, singular
from agent.sdk.streaming import STREAM_MEDIA_TYPE, LineKey, StreamEnd, StreamStart, line
from agent.sdk.tracing_env import provider_from_env, set_span_attribute

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

Handler = Callable[..., Any]
#: How a sync handler is run off the event loop: ``await run_sync(handler, *args)``. The
#: SDK's server uses Starlette's thread pool; the agent, calling a service in its own
#: process, bounds the threads each service may hold (agent/connectors/handler_threads.py).
RunSync = Callable[..., Awaitable[Any]]
_Annotator = TypeVar("_Annotator", bound=AnnotatorHandler)
_Skill = TypeVar("_Skill", bound=SkillHandler)
_Candidate = TypeVar("_Candidate", bound=CandidateAnnotatorHandler)
_SkillSelector = TypeVar("_SkillSelector", bound=SkillSelectorHandler)
_ResponseSelector = TypeVar("_ResponseSelector", bound=ResponseSelectorHandler)

log = logging.getLogger("chorus.sdk")

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
        self,
        name: str,
        *,
        description: str = "",
        tracer_provider: TracerProvider | None = None,
        never_blocks: bool = False,
        never_changes_view: bool = False,
    ) -> None:
        self.name = name
        self.description = description
        #: The author's promise that a sync handler never waits on a socket, a lock or a
        #: sleep: the agent, calling it in its process, may then run its quick calls on
        #: its event loop instead of a thread (agent/connectors/quick_calls.py). A
        #: handler that broke it would hold every turn of the agent; over HTTP it changes
        #: nothing.
        self.never_blocks = never_blocks
        #: The author's promise that the handler only reads the view it is given: sets no
        #: field, adds to or takes from none of its lists and dicts, keeps no part of it
        #: past the call. The agent, calling it in its process, may then show it the
        #: turn's views themselves rather than a copy of each
        #: (agent/connectors/shared_views.py). A handler that broke it would change the
        #: turn's state; over HTTP it changes nothing.
        self.never_changes_view = never_changes_view
        #: Traces the service's requests, continuing the agent's trace; by default the
        #: standard ``OTEL_*`` variables decide (off unless they name an exporter).
        self.tracer_provider = tracer_provider
        self._role: Role | None = None
        self._handler: Handler | None = None
        #: what kind of function the handler is, read once (an agent calls it a dozen
        #: times a turn, and ``inspect`` unwraps it anew each time it is asked)
        self._coroutine = self._generator = False
        self._app: FastAPI | None = None
        self._resources: list[Callable[[], AbstractAsyncContextManager[Any]]] = []

    def _register(self, role: Role, fn: Handler) -> None:
        """Check the function fits its role now, so a broken handler stops the import."""
        if self._handler is not None:
            raise RuntimeError(f"service {self.name!r} already has a handler")
        check_signature(self.name, role, fn)
        self._role, self._handler = role, fn
        self._coroutine = inspect.iscoroutinefunction(fn)
        self._generator = inspect.isasyncgenfunction(fn)

    def annotator(self, fn: _Annotator) -> _Annotator:
        """``fn(dialog) -> JSON``: stored under ``annotations[<service name>]``."""
        self._register("annotators", fn)
        return fn

    def skill(self, fn: _Skill) -> _Skill:
        """``fn(dialog) -> list[SkillHypothesis]`` (or one): response candidates."""
        self._register("skills", fn)
        return fn

    def candidate_annotator(self, fn: _Candidate) -> _Candidate:
        """``fn(dialog, hypothesis) -> JSON``: called for every hypothesis of the turn."""
        self._register("candidate_annotators", fn)
        return fn

    def skill_selector(self, fn: _SkillSelector) -> _SkillSelector:
        """``fn(dialog) -> list[str] | SkillSelection``: the skills to run (and why)."""
        self._register("skill_selectors", fn)
        return fn

    def response_selector(self, fn: _ResponseSelector) -> _ResponseSelector:
        """``fn(dialog) -> Selection | int``: which hypothesis answers."""
        self._register("response_selectors", fn)
        return fn

    def response_annotator(self, fn: _Annotator) -> _Annotator:
        """``fn(dialog) -> JSON``: annotates the bot's answer once it is chosen (the
        dialog's last utterance is the bot's); stored on that utterance."""
        self._register("response_annotators", fn)
        return fn

    def lifespan(
        self, resource: Callable[[], AbstractAsyncContextManager[Any]]
    ) -> Callable[[], AbstractAsyncContextManager[Any]]:
        """Hold ``resource()`` open while the service serves (a client of the model it
        calls, say), wherever it serves: its own server, or the agent's process when the
        pipeline calls it there (agent/connectors/in_process.py)."""
        self._resources.append(resource)
        return resource

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """The service's resources, open for the block (in the order registered)."""
        async with AsyncExitStack() as stack:
            for resource in self._resources:
                await stack.enter_async_context(resource())
            yield

    async def _call(self, run_sync: RunSync, *args: Any) -> Any:
        assert self._handler is not None
        if self._coroutine:
            return await self._handler(*args)
        return await run_sync(self._handler, *args)

    @property
    def role(self) -> Role | None:
        """The role its handler plays (None until a function is decorated)."""
        return self._role

    @property
    def is_async(self) -> bool:
        """Whether the handler runs on the event loop (an ``async def`` or an async
        generator), not in a worker thread."""
        return self._coroutine or self._generator

    @property
    def streams(self) -> bool:
        """Whether the handler streams its text (an async generator skill)."""
        return self._role == "skills" and self._generator

    async def _pieces(self, dialog: DialogView) -> AsyncIterator[StreamStart | str | StreamEnd]:
        """A streaming skill's yields, checked: a :class:`StreamStart` first, then text,
        then maybe one :class:`StreamEnd`."""
        assert self._handler is not None
        first = True
        ended = False
        async for item in self._handler(dialog):
            if first and not isinstance(item, StreamStart):
                raise TypeError(
                    f"skill {self.name!r} must yield a StreamStart (its confidence) before "
                    f"its text, got {type(item).__name__}"
                )
            if ended or (not first and not isinstance(item, str | StreamEnd)):
                raise TypeError(
                    f"skill {self.name!r} yielded {type(item).__name__} after its "
                    f"{'StreamEnd' if ended else 'StreamStart'}: only str pieces of the text "
                    "may follow a StreamStart, and nothing a StreamEnd"
                )
            ended = isinstance(item, StreamEnd)
            first = False
            yield item

    @staticmethod
    def _hypotheses(start: StreamStart | None, text: str, end: StreamEnd | None = None) -> Any:
        """The JSON answer a streamed text makes: one hypothesis, or none without text."""
        if start is None or not text.strip():
            return []
        fields = start.model_dump(mode="json")
        if end is not None:
            fields.update(end.model_dump(mode="json"))
        return _normalise("skills", [SkillHypothesis(text=text, **fields)])

    async def lines(self, dialog: DialogView) -> AsyncGenerator[tuple[LineKey, Any]]:
        """A streaming skill's answer as the lines it sends, unwritten: ``start`` with its
        fields, ``token`` with each piece of text, then ``end`` with the JSON answer the
        text makes. Its server writes them (:meth:`stream`); the agent reads them as they
        are when it calls the skill in its own process."""
        start: StreamStart | None = None
        end: StreamEnd | None = None
        text: list[str] = []
        async for item in self._pieces(dialog):
            if isinstance(item, StreamStart):
                start = item
                yield "start", item.model_dump(mode="json")
            elif isinstance(item, StreamEnd):
                end = item
            else:
                text.append(item)
                yield "token", item
        yield "end", self._hypotheses(start, "".join(text), end)

    async def _collected(self, dialog: DialogView) -> Any:
        """The streamed answer as one JSON answer: the end line's."""
        answer: Any = None
        async for key, value in self.lines(dialog):
            if key == "end":
                answer = value
        return answer

    async def stream(self, dialog: DialogView) -> AsyncIterator[bytes]:
        """One dialog's answer as streamed lines; the first line is made before the
        stream is returned, so a failure that early is the request's (an HTTP status)."""
        lines = self.lines(dialog)
        first = await anext(lines)

        async def written() -> AsyncIterator[bytes]:
            try:
                yield line(*first)
                async for key, value in lines:
                    yield line(key, value)
            except Exception as exc:  # the status is sent: the failure goes in the stream
                yield line("error", f"{type(exc).__name__}: {exc}")

        return written()

    async def answer(self, dialog: DialogView, run_sync: RunSync = run_in_threadpool) -> Any:
        """One dialog's answer, checked against the role's contract. ``run_sync`` runs a
        sync handler off the loop: the agent passes its own, which bounds the threads a
        service may hold, when it calls the service in its process."""
        assert self._role is not None
        if self.streams:
            return await self._collected(dialog)
        if self._role == "candidate_annotators":
            hypotheses: list[HypothesisView] = dialog.human_utterance.hypotheses
            outputs = [await self._call(run_sync, dialog, h) for h in hypotheses]
            return _jsonable(outputs)
        output = await self._call(run_sync, dialog)
        try:
            return _normalise(self._role, output)
        except ValidationError as exc:
            raise ContractError(
                self.name, self._role, handler_name(self._handler), describe_validation(exc)
            ) from exc

    async def respond(self, request: ServiceRequest) -> list[Any]:
        """Answer a batch: one item per dialog, in the order received."""
        set_span_attribute("chorus.batch_size", len(request.dialogs))
        if len(request.dialogs) == 1:  # the usual batch: no task to gather
            return [await self.answer(request.dialogs[0])]
        return list(await asyncio.gather(*(self.answer(d) for d in request.dialogs)))

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
    provider = service.tracer_provider or provider_from_env(service.name)
    owned = provider if service.tracer_provider is None else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with service.serving():
            yield
        if owned is not None:  # send the spans still buffered
            owned.shutdown()

    app = FastAPI(
        title=service.name, description=service.description or service.name, lifespan=lifespan
    )
    if provider is not None:  # so OpenTelemetry is installed (agent/sdk/tracing_env.py)
        from agent.sdk.tracing import TraceRequests

        app.add_middleware(TraceRequests, tracer=provider.get_tracer("chorus.sdk"))
    assert service._role is not None
    role = singular(service._role)

    @app.post("/respond", summary=f"{role} {service.name}", response_model=None)
    async def respond(body: ServiceRequest, request: Request) -> list[Any] | Response:
        streamed = STREAM_MEDIA_TYPE in request.headers.get("accept", "")
        if service.streams and streamed and len(body.dialogs) == 1:
            lines = await service.stream(body.dialogs[0])
            return StreamingResponse(lines, media_type=STREAM_MEDIA_TYPE)
        return await service.respond(body)

    @app.exception_handler(ContractError)
    async def broken_contract(_: Request, exc: ContractError) -> JSONResponse:
        # A 500: the service is at fault, not the request. The header tells the agent the
        # message is the handler's own account, to record as the service's bad response.
        log.error("%s", exc.message)
        return JSONResponse(
            status_code=500,
            content={"message": exc.message, "detail": exc.message},
            headers={CONTRACT_HEADER: "1"},
        )

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "service": service.name, "role": role}

    return app
