"""One socket write for a response's head and body.

uvicorn writes a response's status line and headers when the app starts it, and its body
when the app sends it: two writes, so two sends on the socket, each a segment for the
kernel to carry and the client to wake for. Starlette's responses send both at once, so
:class:`CorkedWrites` keeps the head until the body comes and writes them together; a
head whose body is not sent in the same step of the loop (a stream's first event is
awaited) goes out alone at the end of that step. A response costs the agent one send
instead of two (docs/performance.md, "Half the CPU").
"""

from __future__ import annotations

import asyncio
from typing import Any


class CorkedWrites:
    """The transport one request's response is written to (uvicorn's cycle uses
    ``write``, ``close`` and ``is_closing``; the rest is the connection's own)."""

    __slots__ = ("_flush", "_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._flush: asyncio.Handle | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = data
            self._flush = self._loop.call_soon(self._write_held)
            return
        self._held = None
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._transport.write(held + data)

    def _write_held(self) -> None:
        self._flush = None
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
        self._write_held()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
