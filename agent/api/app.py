"""The agent's FastAPI app, built by :func:`create_app`. The image and ``chorus run`` serve it
with :mod:`agent.api.serve` (``python -m agent.api.serve``), which adds the connection limits
and the frozen heap; ``uvicorn --factory agent.api.app:create_app`` serves it without them.

Settings and the pipeline are read and checked when the app is created, so a bad config
stops the agent before it listens; everything else (the store, the one HTTP client, the
connectors, the message flow) is made in the lifespan by :mod:`agent.api.composition` and
closed after the last request.
"""

from __future__ import annotations

import ctypes
import gc
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
    suppress,
)

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.routing import iter_route_contexts
from fastapi.telemetry import TelemetryConfig
from opentelemetry.sdk.trace import TracerProvider

import agent
from agent.api.composition import assembled
from agent.api.errors import ERROR_RESPONSES, install_error_handlers
from agent.api.front import ChorusApp
from agent.api.readiness import required_services
from agent.api.request_limits import BodySizeLimit
from agent.api.routes import (
    chat,
    chat_ws,
    debug,
    dialogs,
    handoff,
    health,
    load_ws,
    metrics,
    observe,
    operator,
    pages,
    pipeline_info,
    ratings,
)
from agent.kinds import load_configured
from agent.settings import Settings, SettingsError, load_settings
from agent.telemetry import (
    Telemetry,
    TraceRequests,
    configure_logging,
    root_logger_kept,
    tracer_provider_from_env,
)
from agent.turn.arms import Experiment
from agent.turn.base import LoadedPipeline

log = logging.getLogger("chorus")

#: FastAPI's own OpenTelemetry instrumentation, off: the agent's spans are its own
#: (docs/observability.md), made with its own provider, never a global one.
NO_FASTAPI_TELEMETRY: TelemetryConfig = {
    "tracing": False,
    "metrics": False,
    "logs": False,
    "operation_spans": False,
    "auto_configure": False,
}


def _lifespan(
    settings: Settings,
    pipeline: LoadedPipeline,
    telemetry: Telemetry,
    owns_telemetry: bool,
    experiment: Experiment | None,
    own_process: bool = False,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    ready_services = required_services(pipeline, settings.ready_services, experiment)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            async with assembled(
                settings, pipeline, telemetry, ready_services, experiment
            ) as components:
                app.state.components = components
                log.info(
                    "Chorus agent ready: %d services, store %s",
                    len(pipeline.service_names()),
                    settings.db_url.split("://")[0],
                )
                with heap_frozen() if own_process else nullcontext():
                    yield
        finally:
            if owns_telemetry:
                telemetry.shutdown()

    return lifespan


def _build_routes(app: FastAPI) -> None:
    """Build every route's handler and dependencies now, before the agent serves.

    FastAPI builds an included router's routes on their first request. Building one makes
    pydantic warn about each parameter, and FastAPI hides that warning with
    ``warnings.catch_warnings``, which is not thread-safe: two first requests at once (two
    agents in one process) can undo each other's filter, and the warning, an error where
    warnings are errors, becomes a 500. Built here, in the thread that creates the app,
    no request builds a route and the agent is ready with every route in place."""
    for _ in iter_route_contexts(app.routes):
        pass


def _trim_heap() -> None:
    """glibc's ``malloc_trim``: starting frees much it made on the way (the services'
    fitting, tables read then narrowed), and glibc keeps such pages; given back, the
    served agent holds 1-2 MB less (docs/performance.md, "Half the CPU"). Where the C
    library has no such call, nothing."""
    with suppress(OSError, AttributeError, TypeError):
        ctypes.CDLL(None).malloc_trim(0)


#: Objects the garbage collector lets a served agent make (less those freed) before it
#: walks the young ones. Python's 700 was crossed on nearly every LLM turn on its way to
#: the LLM's request (the window's parse alone makes hundreds of containers), and the walk
#: held the request back; at this many it falls on few turns, and the collector's CPU a
#: turn is lower, since nearly everything a turn makes is freed by its count before any
#: walk (docs/performance.md, "The first token, hop by hop").
YOUNG_THRESHOLD = 10_000


@contextmanager
def heap_frozen() -> Iterator[None]:
    """Everything the agent made to start (its pipeline, the models and indexes of the
    services it runs in its own process: some 160,000 objects) lives as long as it does,
    so it is moved out of the garbage collector's reach while the agent serves. Otherwise
    each full collection walks all of it, and the turn it falls in waits for it, once every
    few dozen turns (docs/performance.md, "The services in the agent's process"). Garbage
    made while starting is collected first, and the C heap's free pages go back to the
    system. While it serves, the young objects are walked every :data:`YOUNG_THRESHOLD`
    rather than every 700; the older generations as before."""
    gc.collect()
    _trim_heap()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def create_app(
    settings: Settings | None = None,
    tracer_provider: TracerProvider | None = None,
    *,
    own_process: bool = False,
) -> FastAPI:
    """The agent; ``tracer_provider`` overrides the ``OTEL_*`` environment (for tests).
    ``own_process``: the agent is its process's one app (:mod:`agent.api.serve`), which
    may settle the process's heap once started (:func:`heap_frozen`)."""
    settings = settings or load_settings()
    configure_logging(settings.log_level, settings.log_format)
    with root_logger_kept():  # the pipeline's modules may set it when imported
        pipeline, experiment = load_configured(settings)
    if experiment is not None:
        if settings.arm_key is None:
            log.warning(
                "CHORUS_ARM_KEY is not set: a user's arm is drawn from the experiment's "
                "name alone, so a client that knows the name can choose its arm by "
                "choosing its user id; set it, the same on every replica "
                "(docs/experiments.md)"
            )
        for line in experiment.startup_lines():
            log.info("%s", line)
    webhook = None if pipeline.handoff is None else pipeline.handoff.webhook
    if webhook is not None and settings.operator_key is None:
        raise SettingsError(
            "bad settings: CHORUS_OPERATOR_KEY: the pipeline's handoff.webhook is set, "
            "and its deliveries are signed with the operator key: set it"
        )
    if pipeline.handoff is not None and settings.operator_key is None:
        log.warning(
            "the pipeline has a handoff section but CHORUS_OPERATOR_KEY is not set: no "
            "dialog is handed to a person, since nobody could claim it (docs/handoff.md)"
        )
    provider = tracer_provider or tracer_provider_from_env("chorus-agent")
    telemetry = Telemetry(
        provider,
        json_logs=settings.log_format == "json",
        user_id_key=settings.trace_id_key_bytes(),
    )
    app = ChorusApp(
        title="Chorus agent",
        version=agent.__version__,
        description="Dialogue-state orchestration: a message in, annotators and skills over "
        "HTTP, one answer out. `POST /` is compatible with DeepPavlov Agent.",
        lifespan=_lifespan(
            settings,
            pipeline,
            telemetry,
            owns_telemetry=tracer_provider is None,
            experiment=experiment,
            own_process=own_process,
        ),
        responses=ERROR_RESPONSES,
        # the agent traces its turns with its own provider (agent.telemetry); FastAPI's
        # native request telemetry would otherwise look for global OpenTelemetry
        # providers on every request, to find none
        telemetry=NO_FASTAPI_TELEMETRY,
    )
    install_error_handlers(app)
    for module in (
        chat,
        chat_ws,
        observe,
        dialogs,
        handoff,
        operator,
        ratings,
        health,
        metrics,
        pipeline_info,
        debug,
        load_ws,
        pages,
    ):
        app.include_router(module.router)
    app.mount(pages.ASSETS_PATH, pages.static_files(), name="pages")
    _build_routes(app)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=[
                "Content-Type",
                "X-API-Key",
                "Idempotency-Key",
                "X-Operator-Key",
                "X-Operator",
            ],
        )
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    if telemetry.tracer is not None:  # outermost, so a span covers all the rest
        app.add_middleware(TraceRequests, tracer=telemetry.tracer)
    if settings.api_key is None:
        log.warning(
            "CHORUS_API_KEY is not set: anyone who reaches this agent can read every "
            "dialog and user; set it for any deployment beyond your own machine"
        )
    return app
