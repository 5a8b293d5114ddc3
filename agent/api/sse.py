"""Server-Sent Events: the chat endpoints' answer to ``Accept: text/event-stream`` (a turn's
events), and the form (:func:`sse_data`) in which the handoff routes stream a followed
dialog to the user's channel and to the operator; the WebSocket chat reuses the same
turn-following and error bodies (:func:`follow_turn`, :func:`error_body`).

The turn runs as it would for a JSON client, its message carrying a
:class:`~agent.telemetry.turn_events.TurnEvents` that the flow and the executor report on;
the route shapes the flow's :class:`~agent.flow.Answer` into the last event itself
(``dump``). The response starts only once the turn has
started (its ``accepted`` event), so whatever refuses a message before that (a bad
request, an idempotency key in flight, the user's queue timing out, the database down) is
the same plain 4xx or 503 a JSON client gets. After that the status is 200 and sent: a
failure is an ``error`` event carrying the JSON error's body and its ``status``, made by
the very handler that would have answered the JSON client.

The turn is not tied to the connection: a client that goes away mid-stream leaves the
turn to finish and be stored, as a JSON client that hangs up does.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.requests import HTTPConnection

from agent.api.errors import envelope
from agent.flow import Answer, Incoming, MessageFlow
from agent.telemetry.turn_events import TurnEvent, TurnEvents

log = logging.getLogger("chorus.api")

EVENT_STREAM = "text/event-stream"

#: Turns whose client went away, kept referenced until they end.
_orphans: set[asyncio.Task[Any]] = set()


def wants_events(request: Request) -> bool:
    """Whether the client asked for the turn's events instead of one JSON reply."""
    return EVENT_STREAM in request.headers.get("accept", "").lower()


def event_stream(body: AsyncIterator[bytes]) -> StreamingResponse:
    """``body`` as a Server-Sent Events response, neither cached nor held back by a proxy
    (``X-Accel-Buffering``: nginx would otherwise gather the events into one late write)."""
    return StreamingResponse(
        body,
        media_type=EVENT_STREAM,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def sse(event: TurnEvent) -> bytes:
    """One event in the Server-Sent Events form (one ``data`` line: JSON has no newline)."""
    return sse_data(event.name, event.data)


def sse_data(name: str, data: Any) -> bytes:
    """An event named ``name`` carrying ``data`` as JSON, in the Server-Sent Events form."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {text}\n\n".encode()


async def error_body(connection: HTTPConnection, exc: BaseException) -> dict[str, Any]:
    """The JSON error a client would have got for ``exc``, with its ``status``."""
    handlers = connection.app.exception_handlers
    handler = next((handlers[c] for c in type(exc).__mro__ if c in handlers), None)
    if handler is None or not isinstance(exc, Exception):
        return {"status": 500, **envelope(500, "internal error")}
    response = await handler(connection, exc)
    body = json.loads(bytes(response.body)) if isinstance(response, JSONResponse) else {}
    return {"status": response.status_code, **body}


#: A route's reply to the flow's answer, as the JSON of the ``answer`` event.
Dump = Callable[[Answer], dict[str, Any]]


def followed_turn(flow: MessageFlow, message: Incoming) -> tuple[TurnEvents, asyncio.Task[Answer]]:
    """The flow's answer to ``message`` started as a task, and the events it reports on."""
    events = TurnEvents()
    return events, events.start(flow.reply(replace(message, events=events)))


async def follow_turn(
    events: TurnEvents,
    task: asyncio.Task[Answer],
    dump: Dump,
    on_error: Callable[[BaseException], Awaitable[dict[str, Any]]],
) -> AsyncIterator[TurnEvent]:
    """The turn's events, then ``answer`` with the reply or ``error`` with its failure.
    Shared by every channel that follows turns (SSE here, the WebSocket chat)."""
    async for event in events:
        yield event
    try:
        answer = await task
        reply = dump(answer)
    except Exception as exc:
        yield TurnEvent("error", await on_error(exc))
        return
    yield TurnEvent("answer", reply)


async def started(events: TurnEvents, task: asyncio.Task[Any]) -> TurnEvent | None:
    """The turn's first event; raises what the work raised when it failed before one."""
    first = await events.first()
    if first is None:
        await task  # raises the refusal; a reply with no event is answered below
    return first


async def stream_turn(
    request: Request, flow: MessageFlow, message: Incoming, dump: Dump
) -> StreamingResponse:
    """Answer ``message`` with its turn's events, the route's reply (``dump``) last."""
    events, task = followed_turn(flow, message)
    first = await started(events, task)

    async def body() -> AsyncIterator[bytes]:
        # The events already waiting go out in one write: a stage of in-process services
        # ends a dozen calls at once, and a write each would hold the loop (and the LLM's
        # request, made next) for as many sends.
        try:
            if first is not None:
                yield sse(first)
            waiting: list[bytes] = []
            async for event in follow_turn(
                events, task, dump, lambda exc: error_body(request, exc)
            ):
                waiting.append(sse(event))
                if not events.queued:
                    yield b"".join(waiting)
                    waiting.clear()
            if waiting:
                yield b"".join(waiting)
        finally:
            if not task.done():  # the client went away: the turn still ends and is stored
                _orphans.add(task)
                task.add_done_callback(_orphans.discard)

    return event_stream(body())
