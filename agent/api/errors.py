"""How failures look to a client: one envelope for every 4xx and 5xx the agent answers.

    {"error": "invalid_request", "message": "user_id: Field required",
     "fields": [{"loc": ["body", "user_id"], "msg": "Field required", "type": "missing"}]}

``error`` is a stable code a program can branch on (:data:`CODES`, by status); ``message``
is one sentence for a person, saying what to fix; ``fields`` lists what was wrong field by
field when the request broke the schema, and is empty otherwise. Whatever raised the error
(FastAPI's validation, an ``HTTPException`` of a route or of Starlette's routing, a
``ChorusError``, the body-size middleware) the body has this shape, so a client reads one.

A service fault never gets here (the executor absorbs it); an unexpected error is logged
with its cause and answered as a 500 without internals.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from agent.handoff import HandoffError, NotHandedOff
from agent.idempotency import KeyForgotten, KeyInFlight, KeyReused, KeySuperseded
from agent.queues import QueueTimeout, TurnInterrupted, TurnOvertaken, TurnRunning
from agent.store.base import StoreUnavailable, StoreWriteRefused
from agent.telemetry import printable

log = logging.getLogger("chorus.api")

RETRY_AFTER_SECONDS = 5

#: ``error`` by status; a status not listed gets its HTTP phrase in snake case.
CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    500: "internal_error",
    503: "unavailable",
}


class FieldError(BaseModel):
    """One field the request got wrong, as pydantic reports it."""

    loc: list[int | str]
    msg: str
    type: str


class ErrorBody(BaseModel):
    """The body of every error the agent answers (docs/api.md, "Errors")."""

    error: str = Field(description="a stable code: invalid_request, not_found, conflict, ...")
    message: str = Field(description="what went wrong and what to do about it, in one sentence")
    fields: list[FieldError] = Field(
        default_factory=list, description="the request's faults field by field (422 only)"
    )


#: Every route's error answers in the OpenAPI schema (FastAPI's default 422 schema, with
#: ``detail``, is not what the agent sends).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "the request is refused: `message` says why"},
    "5XX": {"model": ErrorBody, "description": "the agent or its database failed"},
}


def code_of(status_code: int) -> str:
    if status_code in CODES:
        return CODES[status_code]
    try:
        return HTTPStatus(status_code).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


def envelope(status_code: int, message: str, fields: Sequence[FieldError] = ()) -> dict[str, Any]:
    """The JSON of an error: also what the body-size middleware sends on its own."""
    return ErrorBody(error=code_of(status_code), message=message, fields=list(fields)).model_dump(
        mode="json"
    )


def error_response(
    status_code: int,
    message: str,
    *,
    fields: Sequence[FieldError] = (),
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        status_code=status_code,
        content=envelope(status_code, message, fields),
        headers=dict(headers) if headers else None,
    )


def _where(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in {"body", "path", "query"}:
        parts = parts[1:]
    return ".".join(parts) or "body"


async def _invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    message = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in errors)
    fields = [FieldError(loc=list(e["loc"]), msg=e["msg"], type=e["type"]) for e in errors]
    return error_response(status.HTTP_422_UNPROCESSABLE_CONTENT, message, fields=fields)


def too_deep(max_depth: int) -> HTTPException:
    """JSON nested past what the parser can read (Python's recursion limit, far past
    ``MAX_JSON_DEPTH``): the 422 a value over that limit gets, not a server error."""
    return HTTPException(422, f"body: nested more than {max_depth} levels deep (MAX_JSON_DEPTH)")


async def _http(request: Request, exc: Exception) -> JSONResponse:
    """A route's, the routing's (404, 405) or the body limit's ``HTTPException``; FastAPI's
    400 for a body it could not parse because it is nested too deep is the 422 a body over
    ``MAX_JSON_DEPTH`` gets."""
    assert isinstance(exc, HTTPException)
    if isinstance(exc.__cause__, RecursionError):
        exc = too_deep(request.app.state.components.settings.limits.max_depth)
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return error_response(exc.status_code, message, headers=exc.headers)


async def _store_down(_: Request, exc: Exception) -> JSONResponse:
    log.error("database unavailable: %s", printable(exc))
    return error_response(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        "the database is unavailable; retry shortly",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


async def _in_flight(_: Request, exc: Exception) -> JSONResponse:
    return error_response(status.HTTP_409_CONFLICT, str(exc), headers={"Retry-After": "1"})


async def _superseded(_: Request, exc: Exception) -> JSONResponse:
    """No Retry-After: the same request can never succeed."""
    return error_response(status.HTTP_409_CONFLICT, str(exc))


async def _key_reused(_: Request, exc: Exception) -> JSONResponse:
    return error_response(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc))


async def _write_refused(_: Request, exc: Exception) -> JSONResponse:
    # The database's error may quote the document: what a client or a service sent.
    log.error("the database refused a write: %s", printable(exc))
    return error_response(
        status.HTTP_500_INTERNAL_SERVER_ERROR,
        "the database refused to store this turn; it was not stored",
        headers={"Connection": "close"},
    )


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    """A plain 500 that also closes the connection: after an unexpected error nothing
    says the connection is in a state fit for the client's next request."""
    log.error("unexpected error", exc_info=exc)
    return error_response(
        status.HTTP_500_INTERNAL_SERVER_ERROR,
        "internal error; it is logged on the agent",
        headers={"Connection": "close"},
    )


async def _queue_too_long(_: Request, exc: Exception) -> JSONResponse:
    log.warning("a message gave up waiting for the user's earlier ones: %s", printable(exc))
    return error_response(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        str(exc),
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


async def _overtaken(_: Request, exc: Exception) -> JSONResponse:
    """503 with Retry-After, naming the utterance kept unanswered: the message lost its
    place in the queue mid-turn and nothing of its answer was stored (logged by the flow)."""
    assert isinstance(exc, TurnOvertaken)
    body = {**envelope(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc)), "utt_id": exc.utt_id}
    return JSONResponse(
        status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
        content=body,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


async def _turn_running(_: Request, exc: Exception) -> JSONResponse:
    """Double texting: ``reject`` refuses, ``interrupt`` tells the cancelled turn's client;
    both name the utterance concerned."""
    assert isinstance(exc, TurnRunning | TurnInterrupted)
    body = {**envelope(status.HTTP_409_CONFLICT, str(exc)), "utt_id": exc.utt_id}
    return JSONResponse(status_code=status.HTTP_409_CONFLICT, content=body)


async def _handoff(_: Request, exc: Exception) -> JSONResponse:
    """404 for a dialog an operator may not see, 409 for a handoff in another state."""
    code = status.HTTP_404_NOT_FOUND if isinstance(exc, NotHandedOff) else status.HTTP_409_CONFLICT
    return error_response(code, str(exc))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(QueueTimeout, _queue_too_long)
    app.add_exception_handler(TurnOvertaken, _overtaken)
    app.add_exception_handler(KeyInFlight, _in_flight)
    app.add_exception_handler(TurnRunning, _turn_running)
    app.add_exception_handler(TurnInterrupted, _turn_running)
    app.add_exception_handler(KeyReused, _key_reused)
    app.add_exception_handler(KeySuperseded, _superseded)
    app.add_exception_handler(KeyForgotten, _superseded)
    app.add_exception_handler(StoreWriteRefused, _write_refused)
    app.add_exception_handler(HandoffError, _handoff)
    app.add_exception_handler(Exception, _unexpected)
    app.add_exception_handler(StoreUnavailable, _store_down)
