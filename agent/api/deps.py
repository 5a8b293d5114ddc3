"""What routes get injected: the parts :mod:`agent.api.composition` made, typed.

This is the only module that reads them off the app: a route names what it needs
(``reader: ReaderDep``) and never touches ``app.state``. Of the store, a route gets the part
it uses (:data:`agent.store.base.PARTS`), never the whole.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, HTTPException, Query, Request, status
from starlette.requests import HTTPConnection

from agent.api.composition import Components
from agent.api.readiness import Readiness
from agent.api.schemas import MESSAGE_ID_PATTERN
from agent.flow import MessageFlow
from agent.handoff import Handoffs
from agent.metrics import Metrics
from agent.settings import Settings
from agent.store.base import DialogReader, HandoffStore, RatingStore, UserErasure
from agent.turn.arms import Experiment
from agent.turn.base import LoadedPipeline
from agent.turn.config import DoubleTexting


def components_of(connection: HTTPConnection) -> Components:
    """The app's parts, for an HTTP request and a WebSocket alike."""
    components: Components = connection.app.state.components
    return components


async def _components(connection: HTTPConnection) -> Components:
    return components_of(connection)


ComponentsDep = Annotated[Components, Depends(_components)]


async def _reader(components: ComponentsDep) -> DialogReader:
    return components.store.reader


async def _ratings(components: ComponentsDep) -> RatingStore:
    return components.store.ratings


async def _handoff_store(components: ComponentsDep) -> HandoffStore:
    return components.store.handoffs


async def _erasure(components: ComponentsDep) -> UserErasure:
    return components.store


async def _flow(components: ComponentsDep) -> MessageFlow:
    return components.flow


async def _settings(components: ComponentsDep) -> Settings:
    return components.settings


async def _metrics(components: ComponentsDep) -> Metrics:
    return components.metrics


async def _pipeline(components: ComponentsDep) -> LoadedPipeline:
    return components.pipeline


async def _experiment(components: ComponentsDep) -> Experiment | None:
    return components.experiment


async def _readiness(components: ComponentsDep) -> Readiness:
    return components.readiness


async def _handoffs(components: ComponentsDep) -> Handoffs:
    return components.handoffs


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` says the body is JSON."""
    return content_type.split(";")[0].strip().lower() == "application/json"


async def require_json(request: Request) -> None:
    """A body that is not JSON gets a 415 that says how to send it."""
    content_type = request.headers.get("content-type", "")
    if not is_json(content_type):
        raise HTTPException(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            f"send the body as JSON with 'Content-Type: application/json' "
            f"(got {content_type or 'no Content-Type'})",
        )


#: The ``Idempotency-Key`` header, as a route's own parameter.
IdempotencyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=MESSAGE_ID_PATTERN,
        description="retries with the same key are answered once",
    ),
]
#: The ``double_texting`` query parameter, as a route's own parameter.
DoubleTextingQuery = Annotated[
    DoubleTexting | None,
    Query(
        description="if a message of this user is being answered: enqueue (wait for "
        "it), reject (409 naming it) or interrupt (cancel it); default: the pipeline's"
    ),
]


async def _idempotency_key(key: IdempotencyHeader = None) -> str | None:
    return key


async def _double_texting(double_texting: DoubleTextingQuery = None) -> DoubleTexting | None:
    return double_texting


ReaderDep = Annotated[DialogReader, Depends(_reader)]
RatingsDep = Annotated[RatingStore, Depends(_ratings)]
HandoffStoreDep = Annotated[HandoffStore, Depends(_handoff_store)]
ErasureDep = Annotated[UserErasure, Depends(_erasure)]
DoubleTextingPolicy = Annotated[DoubleTexting | None, Depends(_double_texting)]
IdempotencyKey = Annotated[str | None, Depends(_idempotency_key)]
FlowDep = Annotated[MessageFlow, Depends(_flow)]
SettingsDep = Annotated[Settings, Depends(_settings)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
PipelineDep = Annotated[LoadedPipeline, Depends(_pipeline)]
#: the experiment whose arms answer dialogs; None: no experiment runs
ExperimentDep = Annotated[Experiment | None, Depends(_experiment)]
ReadinessDep = Annotated[Readiness, Depends(_readiness)]
HandoffsDep = Annotated[Handoffs, Depends(_handoffs)]
JsonBody = Depends(require_json)
