"""The agent's app, with a front that answers ``POST /``'s plain requests before FastAPI's
and Starlette's layers.

Nearly every request the agent serves is ``POST /`` with a plain JSON message, answered
with one JSON reply or, for a client that asks for them (the chat page, ``chorus chat``),
with the turn's events, and :class:`~agent.api.routes.chat.LeanChatRoute` already answers
both without FastAPI's request machinery. What stood around it was the middleware stack
(the server-error catcher, FastAPI's telemetry and body-limit wrappers, the agent's
body-size limit, the exception handlers' catcher, the dependencies' exit stack) and the
router's walk over every route to find it: each a frame or two on the way in and on the
way out, and a wrapper of ``send`` for every message of the answer (docs/performance.md,
"Half the CPU").

:class:`ChorusApp` takes such a request first and keeps what each layer gave it: the body
limit's 413, the app's exception handlers answering what the turn raises (found by the
exception's class as Starlette finds them), the server error's 500 for anything else,
raised on to the server as Starlette raises it (a streamed turn refused before its first
event included: its events' response has not started then). Anything it would not answer
exactly as the layers do goes through them: a request that is not plain (the route's own
checks), a body without a declared length or sent in chunks, a header given twice, an app
with other middleware (CORS, tracing) or a root path, an app not started yet.
"""

from __future__ import annotations

import inspect
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Message, Receive, Scope, Send

from agent.api.request_limits import BodySizeLimit, refuse_too_large
from agent.api.routes.chat import REPLY_JSON, plain_reply
from agent.api.schemas import AgentReply

_JSON_TYPE = (b"content-type", b"application/json")
#: The middleware whose work the front does itself; with any other, it stands aside.
_KEPT: tuple[object, ...] = (BodySizeLimit,)


class ChorusApp(FastAPI):
    """FastAPI, with ``POST /``'s plain requests answered by :func:`_front` (module
    docstring); every other request, and every one the front hands on, as FastAPI
    answers it."""

    #: Whether the front may answer (None: not known before the first request, when the
    #: middleware is settled)
    _front_open: bool | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/" and scope["method"] == "POST":
            opened = self._front_open
            if opened is None:
                opened = self._front_open = not self.root_path and all(
                    middleware.cls in _KEPT for middleware in self.user_middleware
                )
            if opened and not scope.get("root_path"):
                await _front(self, scope, receive, send)
                return
        await super().__call__(scope, receive, send)


async def _front(app: ChorusApp, scope: Scope, receive: Receive, send: Send) -> None:
    raw_headers = scope["headers"]
    headers = dict(raw_headers)
    declared = headers.get(b"content-length")
    components = getattr(app.state, "components", None)
    if (
        components is None
        or declared is None
        or not declared.isdigit()
        or b"transfer-encoding" in headers
        or len(headers) != len(raw_headers)
    ):
        await FastAPI.__call__(app, scope, receive, send)
        return
    max_bytes = components.settings.max_body_bytes
    if int(declared) > max_bytes:  # refused unread, as the body limit refuses it
        await refuse_too_large(send, max_bytes)
        return
    scope["app"] = app
    request = Request(scope, receive)
    started = False
    try:
        body = await _body(receive)
        answered = await plain_reply(request, body, headers, components)
        if answered is not None:
            started = True
            if isinstance(answered, AgentReply):
                content = REPLY_JSON(answered)
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [(b"content-length", b"%d" % len(content)), _JSON_TYPE],
                    }
                )
                await send({"type": "http.response.body", "body": content})
            else:
                await answered(scope, receive, send)
            return
    except Exception as exc:
        if started:
            raise
        await _failed(app, request, exc, send)
        return
    # not plain: through every layer, the body read given again
    await FastAPI.__call__(app, scope, _replayed(body, receive), send)


async def _body(receive: Receive) -> bytes:
    """The request's body, as Starlette's ``Request.body`` reads it; a client gone before
    it was whole gets the 400 the route gives a body it could not read."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise HTTPException(400, "There was an error parsing the body")
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _replayed(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read given first, whole."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _failed(app: FastAPI, request: Request, exc: Exception, send: Send) -> None:
    """Answer ``exc`` as the layers would: by the app's handler for its class (for an
    ``HTTPException``, for its status first), as Starlette's exception middleware does;
    else with the server error's 500 (the app's handler for ``Exception``), and raised on
    to the server, as Starlette's server-error middleware does."""
    handlers: dict[Any, Any] = app.exception_handlers
    handler = (
        handlers.get(exc.status_code)
        if isinstance(exc, HTTPException) and exc.status_code != 500
        else None
    )
    if handler is None:
        handler = next(
            (
                handlers[kind]
                for kind in type(exc).__mro__
                if kind in handlers and kind is not Exception
            ),
            None,
        )
    scope, receive = request.scope, request.receive
    if handler is not None:
        await (await _response(handler, request, exc))(scope, receive, send)
        return
    server_error = handlers.get(500) or handlers.get(Exception)
    response = (
        PlainTextResponse("Internal Server Error", status_code=500)
        if server_error is None
        else await _response(server_error, request, exc)
    )
    await response(scope, receive, send)
    raise exc


async def _response(handler: Any, request: Request, exc: Exception) -> Response:
    answered = handler(request, exc)
    if inspect.isawaitable(answered):
        answered = await answered
    response: Response = answered
    return response
