"""An app served in the test's process without a socket: its lifespan run on an event loop
of its own, in a thread, and a synchronous ``httpx.Client`` whose requests go through
``httpx.ASGITransport`` on that loop.

What the agent does with a request (routes, the turn, the store, the services it calls) is
the same as behind uvicorn; what this leaves out is what only a socket shows: the HTTP
server's parsing and limits, a client that disconnects, streaming as it arrives (the
transport hands over a response once it is complete), WebSockets, a process's shutdown.
Tests of those keep :func:`tests.support.servers.serving`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any

import httpx
from starlette.types import ASGIApp

#: How long a test waits for the app's lifespan to open or close: far above a start on a
#: busy machine; only the bound of a wait for the event itself.
LIFESPAN_TIMEOUT = 90.0


class _LoopThread:
    """An event loop running in a daemon thread, as a server's would."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Any, timeout: float | None = None) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=15)
        self.loop.close()


class _Transport(httpx.BaseTransport):
    """A synchronous transport handing each request to ``httpx.ASGITransport`` on the
    app's loop, and its whole response back."""

    def __init__(self, app: ASGIApp, loop: _LoopThread) -> None:
        # An error the app lets out is answered 500, as uvicorn answers it, not raised in
        # the test.
        self._asgi = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        self._loop = loop

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        # A body sent without a length (streamed, chunked) reaches the app as a stream too,
        # so that what reads it as it comes (the body's size limit) sees it so.
        streamed = "content-length" not in request.headers

        async def pieces() -> AsyncIterator[bytes]:
            yield body

        async def call() -> tuple[int, httpx.Headers, bytes]:
            forwarded = httpx.Request(
                request.method,
                request.url,
                headers=request.headers,
                content=pieces() if streamed else body,
            )
            response = await self._asgi.handle_async_request(forwarded)
            return response.status_code, response.headers, await response.aread()

        status, headers, content = self._loop.run(call())
        return httpx.Response(status, headers=headers, content=content, request=request)


@contextmanager
def hosted(app: Any, timeout: float = 30.0) -> Iterator[httpx.Client]:
    """``app`` with its lifespan open, and a client to it (base URL ``http://agent``); the
    lifespan closes at the end, as a server's stop closes it."""
    loop = _LoopThread()
    opened = asyncio.Event()
    stop = asyncio.Event()

    async def lifespan() -> None:
        context: AbstractAsyncContextManager[Any] = app.router.lifespan_context(app)
        async with context:
            opened.set()
            await stop.wait()

    running: Future[None] = asyncio.run_coroutine_threadsafe(lifespan(), loop.loop)
    try:
        loop.run(_first(opened.wait(), running), LIFESPAN_TIMEOUT)
        with httpx.Client(
            transport=_Transport(app, loop), base_url="http://agent", timeout=timeout
        ) as client:
            yield client
    finally:
        loop.loop.call_soon_threadsafe(stop.set)
        try:
            running.result(LIFESPAN_TIMEOUT)
        finally:
            loop.close()


async def _first(opened: Any, running: Future[None]) -> None:
    """Wait until the lifespan opened; raise its error if it failed to."""
    wrapped = asyncio.wrap_future(running)
    waiting = asyncio.ensure_future(opened)
    done, _ = await asyncio.wait({waiting, wrapped}, return_when=asyncio.FIRST_COMPLETED)
    if wrapped in done:
        waiting.cancel()
        wrapped.result()
        raise RuntimeError("the app's lifespan ended as it started")
