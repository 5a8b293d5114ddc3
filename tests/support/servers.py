"""Real HTTP servers on 127.0.0.1 for tests: uvicorn in a thread, as httpx's own tests do.

Every service a test talks to is a real server with its own event loop; nothing is mocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

#: How often a stopping server looks whether its connections and requests are done.
_POLL = 0.005
#: How long a stopping server waits for requests still running before it cancels them.
_GRACE = 0.25


class _PromptServer(uvicorn.Server):
    """uvicorn's server, stopped as soon as its work allows: uvicorn notices ``should_exit``
    on its next 0.1 s tick and then sleeps 0.1 s more before it waits for connections, in
    0.1 s steps. A test suite starting a thousand servers paid minutes for those ticks.
    Here a stop wakes the main loop at once and the wait polls finely; what is waited for
    (open connections closed, requests finished, then the app's lifespan shutdown) is
    uvicorn's, in uvicorn's order."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    def stop_soon(self) -> None:
        """Ask the server, from another thread, to stop now."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # its loop already closed
                loop.call_soon_threadsafe(wake.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        if not await self._settled(_GRACE):
            # A handler still running when its test ends (a service made to hang) is
            # cancelled, as uvicorn does past its graceful-shutdown timeout: nobody waits
            # for its answer any more.
            for task in list(self.server_state.tasks):
                task.cancel(msg="the test's server stopped")
            await self._settled(_GRACE)
        for server in self.servers:
            await server.wait_closed()
        await self.lifespan.shutdown()

    async def _settled(self, seconds: float) -> bool:
        """Whether every connection closed and every request finished within ``seconds``
        (uvicorn signals neither, so this polls)."""
        deadline = time.monotonic() + seconds
        while self.server_state.connections or self.server_state.tasks:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(_POLL)
        return True


class ServerThread:
    """A uvicorn server for one ASGI app, running in a daemon thread.

    Without a ``port`` it listens on a socket bound here to a port the kernel picks, and
    keeps it: a port looked up free and bound later could be taken in between by another
    process (the tests run in parallel, ``pytest -n``). With a ``port`` (a restart on the
    same one) uvicorn binds it. ``loop_factory`` makes the server's event loop (uvicorn's
    own by default), e.g. a :class:`tests.support.clock.TravellingLoop`.
    """

    def __init__(
        self,
        app: Any,
        port: int | None = None,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
    ) -> None:
        self._sockets: list[socket.socket] | None = None
        if port is None:
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
            listener.bind(("127.0.0.1", 0))
            self._sockets, port = [listener], listener.getsockname()[1]
        self.port: int = port
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            access_log=False,
            lifespan="on",
        )
        self.server = _PromptServer(config)
        self._loop_factory = loop_factory
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        if self._loop_factory is None:
            self.server.run(sockets=self._sockets)
            return
        with asyncio.Runner(loop_factory=self._loop_factory) as runner:
            runner.run(self.server.serve(sockets=self._sockets))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + timeout
        # Readiness probe: uvicorn flips `started` once the socket listens and the
        # lifespan has run.
        while not self.server.started:
            if not self.thread.is_alive():
                self._close_sockets()
                raise RuntimeError(f"server on port {self.port} failed to start")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server on port {self.port} did not start in {timeout}s")
            time.sleep(0.01)
        return self

    def _close_sockets(self) -> None:
        for listener in self._sockets or ():
            listener.close()

    def stop(self) -> None:
        self.server.stop_soon()
        self.thread.join(timeout=15)
        self._close_sockets()  # closed with the server already; not when it never started


@contextmanager
def serving(
    app: Any,
    port: int | None = None,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> Iterator[ServerThread]:
    server = ServerThread(app, port, loop_factory).start()
    try:
        yield server
    finally:
        server.stop()
