"""Refuse request bodies over the limit with a 413, before they are read whole.

A pure ASGI middleware: it checks ``Content-Length`` up front and counts the bytes of a
streamed body, so a client cannot make the agent buffer more than the limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent.api.errors import envelope
from agent.sdk.errors import ChorusError
from agent.state.storage_limits import StorageLimits


def check_text(text: str, max_length: int, field: str) -> None:
    """A user message over ``CHORUS_MAX_TEXT_LENGTH`` gets a 422 that gives the limit; one
    that is not valid Unicode (a lone surrogate, which JSON's ``\\ud800`` can carry) could
    never be stored, so it gets a 422 too."""
    if len(text) > max_length:
        raise HTTPException(
            422,
            f"{field} is {len(text)} characters long; the limit is "
            f"{max_length} (CHORUS_MAX_TEXT_LENGTH)",
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise HTTPException(
            422, f"{field} holds a lone UTF-16 surrogate, which is not valid Unicode text"
        ) from None


def check_user_id(user_id: str, max_length: int) -> None:
    """A user id over ``max_length`` (``MAX_USER_ID_LENGTH``) gets a 422 that gives the
    limit (the schema already refused what is not printable text)."""
    if len(user_id) > max_length:
        raise HTTPException(
            422,
            f"user_id is {len(user_id)} characters long; the limit is "
            f"{max_length} (MAX_USER_ID_LENGTH)",
        )


def attributes_or_422(
    attributes: Callable[[], dict[str, Any]], limits: StorageLimits
) -> dict[str, Any]:
    """The extra fields to store with the utterance; a key or a value that could not be
    stored safely, or read back, is the client's to fix (422), not a server error."""
    try:
        stored = attributes()
        limits.measure(stored, "body")
    except ValueError as exc:  # UnstorableValue included
        raise HTTPException(422, str(exc)) from None
    return stored


class BodyTooLarge(ChorusError, HTTPException):
    """Raised while the body streams in; an HTTPException so FastAPI's body parsing lets it
    through (it turns other errors into a 400) and answers 413."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, _message(max_bytes))


def _message(max_bytes: int) -> str:
    return f"request body is over the {max_bytes} bytes limit (CHORUS_MAX_BODY_BYTES)"


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > self.max_bytes:
                await self._refuse(send)
                return
            if b"transfer-encoding" not in headers:
                # the server reads a body of its declared length and no more: nothing
                # to count (a request's receive and send unwrapped, on every turn)
                await self.app(scope, receive, send)
                return
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        await refuse_too_large(send, self.max_bytes)


async def refuse_too_large(send: Send, max_bytes: int) -> None:
    """The 413 of a body over ``max_bytes``, sent before it is read (also by the app's
    front, :mod:`agent.api.front`)."""
    body = json.dumps(envelope(413, _message(max_bytes))).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
