"""How failures look to a client: 4xx that say what to fix, 503 when the database is away.

A service fault never gets here (the executor absorbs it); an unexpected error is logged
with its cause and answered as a plain 500 without internals.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from agent.idempotency import KeyInFlight, KeyReused, KeySuperseded
from agent.lines import LineTimeout, TurnInterrupted, TurnRunning
from agent.store.base import StoreUnavailable, StoreWriteRefused
from agent.telemetry import printable

log = logging.getLogger("chorus.api")

RETRY_AFTER_SECONDS = 5


def _where(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in {"body", "path", "query"}:
        parts = parts[1:]
    return ".".join(parts) or "body"


async def _invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    message = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in errors)
    return JSONResponse(
        status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        content={
            "detail": [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in errors],
            "message": message,
        },
    )


async def _store_down(_: Request, exc: Exception) -> JSONResponse:
    log.error("database unavailable: %s", printable(exc))
    return JSONResponse(
        status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
        content={"detail": "the database is unavailable; retry shortly"},
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


async def _in_flight(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(
        status_code=status.HTTP_409_CONFLICT,
        content={
            "detail": f"message {exc} is being answered right now; retry shortly to get its answer"
        },
        headers={"Retry-After": "1"},
    )


async def _superseded(_: Request, exc: Exception) -> JSONResponse:
    """No Retry-After: the same request can never succeed."""
    return JSONResponse(status_code=status.HTTP_409_CONFLICT, content={"detail": str(exc)})


async def _id_reused(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(
        status_code=status.HTTP_422_UNPROCESSABLE_CONTENT, content={"detail": str(exc)}
    )


async def _write_refused(_: Request, exc: Exception) -> JSONResponse:
    # The database's error may quote the document: what a client or a service sent.
    log.error("the database refused a write: %s", printable(exc))
    return JSONResponse(
        status_code=status.HTTP_500_INTERNAL_SERVER_ERROR,
        content={"detail": "the database refused to store this turn; it was not stored"},
        headers={"Connection": "close"},
    )


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    """A plain 500 that also closes the connection: after an unexpected error nothing
    says the connection is in a state fit for the client's next request."""
    log.error("unexpected error", exc_info=exc)
    return JSONResponse(
        status_code=status.HTTP_500_INTERNAL_SERVER_ERROR,
        content={"detail": "internal error"},
        headers={"Connection": "close"},
    )


async def _line_too_long(_: Request, exc: Exception) -> JSONResponse:
    log.warning("a message gave up waiting for the user's earlier ones: %s", printable(exc))
    return JSONResponse(
        status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
        content={"detail": str(exc)},
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


async def _turn_running(_: Request, exc: Exception) -> JSONResponse:
    """Double texting: ``reject`` refuses, ``interrupt`` tells the cancelled turn's client;
    both name the utterance concerned."""
    assert isinstance(exc, TurnRunning | TurnInterrupted)
    return JSONResponse(
        status_code=status.HTTP_409_CONFLICT, content={"detail": str(exc), "utt_id": exc.utt_id}
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(LineTimeout, _line_too_long)
    app.add_exception_handler(KeyInFlight, _in_flight)
    app.add_exception_handler(TurnRunning, _turn_running)
    app.add_exception_handler(TurnInterrupted, _turn_running)
    app.add_exception_handler(KeyReused, _id_reused)
    app.add_exception_handler(KeySuperseded, _superseded)
    app.add_exception_handler(StoreWriteRefused, _write_refused)
    app.add_exception_handler(Exception, _unexpected)
    app.add_exception_handler(StoreUnavailable, _store_down)
