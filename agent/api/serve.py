"""Serve the agent with uvicorn: ``python -m agent.api.serve --host 0.0.0.0 --port 4242``.

The image and ``chorus run`` serve the agent this way, never with ``uvicorn --factory
agent.api.app:create_app`` alone: the difference is the agent's heap frozen once it has
started (:func:`agent.api.app.heap_frozen`), and the connection limits of
:mod:`agent.api.connection_limits`: :class:`~agent.api.connection_limits.LimitedHttp`,
which bounds what a client can hold of the agent (an idle socket, a huge or never-ending
request header, any number of connections), and
:class:`~agent.api.connection_limits.LimitedWebSocket` (WebSockets: their share of the
connections, their idle time, their messages' size), with limits from the ``CHORUS_*``
settings.
"""

from __future__ import annotations

import argparse
import logging
import resource
import sys

import uvicorn
from fastapi import FastAPI

from agent.api.app import create_app
from agent.api.connection_limits import (
    REFUSALS_ANSWERED,
    ServerLimits,
    limited_http,
    limited_websocket,
)
from agent.connectors.http import DEFAULT_POOL_SIZE
from agent.settings import Settings, SettingsError, load_settings

#: What the agent image and ``chorus run`` serve.
APP = "agent.api.serve:served_app"

#: Descriptors an agent process needs besides its clients' connections: the HTTP client's
#: pool to the services, MongoDB's default pool of 100, the connections being refused past the
#: cap, and some for the listening socket, the SQLite files, logs and the rest.
RESERVED_DESCRIPTORS = DEFAULT_POOL_SIZE + 100 + REFUSALS_ANSWERED + 64

#: The default cap never goes past this, however high the open-file limit: each connection
#: may hold up to MAX_HEADER_BYTES of unfinished headers, so the cap bounds memory too.
DEFAULT_MAX_CONNECTIONS = 4096

#: Largest request line plus headers: a larger one gets 431 and its connection is closed.
MAX_HEADER_BYTES = 65_536

#: Seconds a request's headers may take from their first byte: then 408, and the
#: connection is closed (a client trickling bytes in cannot hold its socket for ever).
HEADER_TIMEOUT = 10.0

#: Seconds a WebSocket may go without a message either way while the agent waits for the
#: client (pings do not count): then it is closed with 1001, freeing its connection.
WEBSOCKET_IDLE_TIMEOUT = 300.0

log = logging.getLogger("chorus.server")


def default_max_connections() -> int:
    """The open-file limit (soft) less :data:`RESERVED_DESCRIPTORS`, within 16..4096."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return DEFAULT_MAX_CONNECTIONS
    return max(16, min(DEFAULT_MAX_CONNECTIONS, soft - RESERVED_DESCRIPTORS))


def server_limits(settings: Settings) -> ServerLimits:
    """The HTTP server's limits from the settings; a cap the open-file limit cannot hold
    is kept (the operator chose it), with a warning. WebSockets may hold half the cap
    (at least one), so the other half stays for plain HTTP clients."""
    cap = settings.max_connections
    if cap is None:
        cap = default_max_connections()
    else:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and cap > soft - RESERVED_DESCRIPTORS:
            log.warning(
                "CHORUS_MAX_CONNECTIONS=%d leaves fewer than %d of the %d open files "
                "(ulimit -n) for the database and the services",
                cap,
                RESERVED_DESCRIPTORS,
                soft,
            )
    return ServerLimits(
        max_header_bytes=MAX_HEADER_BYTES,
        header_timeout=HEADER_TIMEOUT,
        max_connections=cap,
        max_websockets=max(1, cap // 2),
        websocket_idle_timeout=WEBSOCKET_IDLE_TIMEOUT,
        max_message_bytes=settings.max_body_bytes,
    )


def served_app() -> FastAPI:
    """The agent as its process's one app (:func:`agent.api.app.create_app`'s
    ``own_process``)."""
    return create_app(own_process=True)


def serve(host: str, port: int, log_level: str = "info", settings: Settings | None = None) -> None:
    """Serve the app on ``host:port``. The app reads the settings again when uvicorn creates
    it (``APP`` is a factory), from the same environment: ``settings`` only saves reading
    them twice here when the caller already has them."""
    limits = server_limits(settings or load_settings())
    uvicorn.run(
        APP,
        factory=True,
        host=host,
        port=port,
        log_level=log_level,
        http=limited_http(limits),
        ws=limited_websocket(limits),
        ws_max_size=limits.max_message_bytes,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the Chorus agent.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4242)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    try:
        settings = load_settings()
    except SettingsError as exc:
        sys.exit(f"error: {exc}")
    serve(args.host, args.port, args.log_level, settings)


if __name__ == "__main__":
    main()
