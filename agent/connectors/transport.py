"""What carries a connector's request to a service: a socket, or a function in memory.

:class:`~agent.connectors.http.HttpConnector` builds the request and reads the answer
(status, size bound, JSON, streamed lines); a :class:`Transport` only carries it. The agent
uses :class:`~agent.connectors.wire.WireTransport`, its one pool of connections; a test,
or a service author checking a pipeline, can hand the connectors a :class:`MockTransport`
instead, as httpx's ``MockTransport``: a function from a :class:`Request` to a
:class:`Response`, with no server at all. A handler plays a service that is down by raising
``ConnectionRefusedError``, one whose connection breaks by raising ``ConnectionError``,
and one that never answers by hanging (an async handler) or raising ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.sdk.streaming import STREAM_MEDIA_TYPE


@dataclass(frozen=True, slots=True)
class Request:
    """One POST to a service."""

    url: str
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


class Reply(Protocol):
    """A service's answer as it arrives: status and headers first, the body on demand."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def content_type(self) -> str: ...

    @property
    def content_length(self) -> int | None: ...

    async def read(self, limit: int) -> bytes:
        """The body, or its first ``limit`` bytes when it is longer."""
        ...

    def lines(self) -> AsyncIterator[bytes]:
        """The body line by line as it arrives, each with its newline."""
        ...


#: What :meth:`Transport.post` returns: the status, the headers (names in lower case, as
#: bytes) and the body, or its first ``max_bytes + 1`` bytes when it is longer.
Answer = tuple[int, Mapping[bytes, bytes], bytes]


class Transport(Protocol):
    def send(self, request: Request, time_limit: float) -> AbstractAsyncContextManager[Reply]:
        """Open the exchange; the answer must be read within ``time_limit`` seconds, or
        ``TimeoutError``. A failed connection raises ``OSError``."""
        ...

    async def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        time_limit: float,
        max_bytes: int,
    ) -> Answer:
        """``send`` and a read of the whole answer in one call, for the answers a connector
        reads whole (every service call but a stream): a transport may then make no
        request or reply object. An answer that declares more than ``max_bytes`` is
        returned with an empty body, unread. The same errors as ``send``'s."""
        ...


@dataclass(slots=True)
class Response:
    """A whole answer held in memory, as a :class:`MockTransport` handler returns it."""

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of_json(cls, data: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(data).encode(), {"Content-Type": "application/json"})

    @classmethod
    def of_lines(cls, lines: Iterable[Mapping[str, Any]]) -> Response:
        """A streamed answer (:mod:`agent.sdk.streaming`): one JSON object a line."""
        body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        return cls(200, body, {"Content-Type": STREAM_MEDIA_TYPE})

    @property
    def content_type(self) -> str:
        for key, value in self.headers.items():
            if key.lower() == "content-type":
                return value.split(";", 1)[0].strip().lower()
        return "application/octet-stream"

    @property
    def content_length(self) -> int | None:
        return len(self.body)

    async def read(self, limit: int) -> bytes:
        return self.body[:limit]

    async def lines(self) -> AsyncIterator[bytes]:
        for line in self.body.splitlines(keepends=True):
            yield line


Handler = Callable[[Request], Response | Awaitable[Response]]


class MockTransport:
    """Answers every request with ``handler(request)`` (a function or a coroutine
    function), in memory; an async handler is bounded by the call's time limit."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    @asynccontextmanager
    async def send(self, request: Request, time_limit: float) -> AsyncIterator[Reply]:
        async with asyncio.timeout(time_limit):
            answer = self.handler(request)
            response = answer if isinstance(answer, Response) else await answer
        yield response

    async def post(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        time_limit: float,
        max_bytes: int,
    ) -> Answer:
        async with self.send(Request(url, body, headers), time_limit) as response:
            lowered = {
                key.lower().encode("latin-1"): value.encode("latin-1")
                for key, value in response.headers.items()
            }
            declared = response.content_length
            if declared is not None:  # as a server says it on the wire
                lowered.setdefault(b"content-length", b"%d" % declared)
            if declared is not None and declared > max_bytes:
                return response.status, lowered, b""
            return response.status, lowered, await response.read(max_bytes + 1)
