"""Serve the agent with uvicorn: ``python -m agent.api.serve --host 0.0.0.0 --port 4242``.

One thing differs from ``uvicorn --factory agent.api.app:create_app``: a connection that
never sends a request is closed after the keep-alive timeout. uvicorn starts that timer
only once a first response is sent, so a client could otherwise hold any number of idle
sockets open for ever (each one a file descriptor of the agent).
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: What the agent image and ``chorus run`` serve.
APP = "agent.api.app:create_app"


class IdleClosingHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the keep-alive timer running from the connection's
    first moment (the first bytes of a request stop it, as between requests)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )


def serve(host: str, port: int, log_level: str = "info") -> None:
    uvicorn.run(APP, factory=True, host=host, port=port, log_level=log_level, http=IdleClosingHttp)


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the Chorus agent.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4242)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    serve(args.host, args.port, args.log_level)


if __name__ == "__main__":
    main()
